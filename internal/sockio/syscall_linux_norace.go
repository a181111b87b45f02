//go:build linux && !race

package sockio

import (
	"syscall"
	"unsafe"
)

const rawSupported = true

// sysRead and sysWrite are read(2) and write(2) made without entering the
// scheduler's syscall state: fd is non-blocking, so neither waits.

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}
