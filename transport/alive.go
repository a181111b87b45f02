package transport

import (
	"errors"
	"os"
	"runtime"
	"time"
)

// aliveByDeadline peeks with a deadline already past: a timeout means the
// connection is quiet and alive; EOF, an error or data means it is not.
func (pc *h1Conn) aliveByDeadline() bool {
	pc.conn.SetReadDeadline(aLongTimeAgo)
	_, err := pc.br.Peek(1)
	pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// yieldProcessor lets another goroutine run (the body writer finishing).
func yieldProcessor() { runtime.Gosched() }
