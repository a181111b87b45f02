package h1conn

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sendQueue reads how many bytes wait in a socket's send queue, unsent or
// not yet acknowledged (one ioctl, SIOCOUTQ). It is made once per
// connection: the function handed to RawConn.Control is bound to it then,
// so a reading allocates nothing (a closure capturing its results would
// allocate three times per request).
type sendQueue struct {
	rc     syscall.RawConn
	read   func(fd uintptr)
	queued int
	err    error
	hook   func(queued int) // Config.SendQueue
}

func newSendQueue(rc syscall.RawConn, hook func(queued int)) *sendQueue {
	q := &sendQueue{rc: rc, hook: hook}
	q.read = q.ioctl
	return q
}

func (q *sendQueue) ioctl(fd uintptr) {
	q.queued, q.err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
}

// empty reports whether the socket's send queue holds no byte; false when
// q is nil or the ioctl fails. Only the goroutine running the
// connection's request calls it.
func (q *sendQueue) empty() bool {
	if q == nil {
		return false
	}
	if err := q.rc.Control(q.read); err != nil || q.err != nil {
		return false
	}
	if hook := q.hook; hook != nil {
		hook(q.queued)
	}
	return q.queued == 0
}
