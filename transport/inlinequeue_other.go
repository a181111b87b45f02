//go:build !linux

package transport

import "syscall"

// sendQueueEmpty cannot read the send queue here: after a connection has
// carried one body, its later bodies go to the body writer.
func sendQueueEmpty(syscall.RawConn) bool { return false }

// testHookSendQueue is never called here (see the Linux version).
var testHookSendQueue func(queued int)
