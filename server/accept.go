package server

import (
	"log"
	"net"
	"syscall"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// optionListener applies socket options to each accepted connection, once,
// on the accepting goroutine; the connection itself is returned unwrapped so
// net/http sees the real *net.TCPConn.
type optionListener struct {
	net.Listener
	settings []sockopt.Setting
	newGuard func(syscall.Conn) (*sockopt.Guard, error)
	errorLog *log.Logger // nil: the log package's standard logger
}

// Accept returns the next connection with the options applied. A
// connection whose options fail is kept (the options are a tuning, not a
// condition of service) and the failure is logged, naming the option.
func (l *optionListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c, nil
	}
	g, err := l.newGuard(sc)
	if err == nil {
		err = g.Apply(l.settings)
	}
	if err != nil {
		l.logf("server: socket options for %v: %v", c.RemoteAddr(), err)
	}
	return c, nil
}

func (l *optionListener) logf(format string, args ...any) {
	if l.errorLog != nil {
		l.errorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// validateSettings checks every setting's option and value against the
// guard's rules without changing the socket: a Guard whose setter does
// nothing validates exactly as the real one and makes no syscall.
func validateSettings(c syscall.Conn, settings []sockopt.Setting) error {
	if len(settings) == 0 {
		return nil
	}
	g, err := sockopt.NewGuardWithSetter(c, func(uintptr, sockopt.Family, sockopt.Option, int) error { return nil })
	if err != nil {
		return err
	}
	return g.Apply(settings)
}
