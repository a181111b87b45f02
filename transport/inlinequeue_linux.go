package transport

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sendQueueEmpty reports whether rc's socket has no byte waiting in its
// send queue, unsent or not yet acknowledged (one ioctl, SIOCOUTQ). False
// when rc is nil or the ioctl fails.
func sendQueueEmpty(rc syscall.RawConn) bool {
	if rc == nil {
		return false
	}
	queued, qerr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		queued, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	}); err != nil || qerr != nil {
		return false
	}
	if hook := testHookSendQueue; hook != nil {
		hook(queued)
	}
	return queued == 0
}

// testHookSendQueue, when set by a test, is called with each send-queue
// reading.
var testHookSendQueue func(queued int)
