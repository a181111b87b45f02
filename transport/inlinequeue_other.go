//go:build !linux

package transport

import "syscall"

// sendQueue cannot read a socket's send queue here: after a connection has
// carried one body, its later bodies go to the body writer.
type sendQueue struct{}

func newSendQueue(syscall.RawConn) *sendQueue { return nil }

func (q *sendQueue) empty() bool { return false }

// testHookSendQueue is never called here (see the Linux version).
var testHookSendQueue func(queued int)
