//go:build !linux

package sockio

import "syscall"

const rawSupported = false

func sysRead(fd uintptr, p []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
