//go:build linux && race

package sockio

import "syscall"

const rawSupported = true

// With the race detector, the calls go through syscall.Read and
// syscall.Write: they record that what one goroutine wrote to a socket
// happens before another goroutine of the process reads it, and without
// that the detector reports races between a test's server and client
// that the socket orders.

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return n, errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
