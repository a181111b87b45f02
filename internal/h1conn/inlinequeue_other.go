//go:build !linux

package h1conn

import "syscall"

// sendQueue cannot read a socket's send queue here: after a connection has
// carried one body, its later bodies go to the body writer.
type sendQueue struct{}

func newSendQueue(syscall.RawConn, func(int)) *sendQueue { return nil }

func (q *sendQueue) empty() bool { return false }
