// Package proccost reads what this process has spent so far: CPU time and
// context switches (getrusage) and read/write syscalls (/proc/self/io
// syscr + syscw, zero where there is no /proc). Benchmarks take a reading
// before and after their loop and divide the difference by the operations,
// with the server in a child process so only the client's cost is counted.
package proccost

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cost is a reading, or the difference of two.
type Cost struct {
	CPU   time.Duration // user + system time
	User  time.Duration // user time: the process's own code
	Sys   time.Duration // system time: the kernel on its behalf
	CtxSw int64         // voluntary + involuntary context switches
	RW    int64         // read and write syscalls: Reads + Writes
	Reads int64         // read syscalls (syscr), failed ones included
	// Writes is write syscalls (syscw).
	Writes int64
}

// Read returns the process's cost so far.
func Read() Cost {
	var c Cost
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.User, c.Sys = time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
		c.CPU = c.User + c.Sys
		c.CtxSw = ru.Nvcsw + ru.Nivcsw
	}
	if data, err := os.ReadFile("/proc/self/io"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			switch k {
			case "syscr":
				c.Reads, _ = strconv.ParseInt(v, 10, 64)
			case "syscw":
				c.Writes, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	c.RW = c.Reads + c.Writes
	return c
}

// Since returns what was spent from the reading before until now.
func Since(before Cost) Cost {
	now := Read()
	return Cost{CPU: now.CPU - before.CPU, User: now.User - before.User, Sys: now.Sys - before.Sys,
		CtxSw: now.CtxSw - before.CtxSw, RW: now.RW - before.RW,
		Reads: now.Reads - before.Reads, Writes: now.Writes - before.Writes}
}

// Plus returns the sum of c and d (the cost of two measured spans).
func (c Cost) Plus(d Cost) Cost {
	return Cost{CPU: c.CPU + d.CPU, User: c.User + d.User, Sys: c.Sys + d.Sys,
		CtxSw: c.CtxSw + d.CtxSw, RW: c.RW + d.RW, Reads: c.Reads + d.Reads, Writes: c.Writes + d.Writes}
}

// PerOp divides c by n operations: CPU ns, context switches and read/write
// syscalls per operation, in the units benchmarks report them.
func (c Cost) PerOp(n int) (cpuNs, ctxSw, rw float64) {
	f := float64(n)
	return float64(c.CPU.Nanoseconds()) / f, float64(c.CtxSw) / f, float64(c.RW) / f
}

// ReadsWritesPerOp divides c's read and write syscalls by n operations.
func (c Cost) ReadsWritesPerOp(n int) (reads, writes float64) {
	f := float64(n)
	return float64(c.Reads) / f, float64(c.Writes) / f
}

// UserSysPerOp divides c's user and system time by n operations, in ns.
func (c Cost) UserSysPerOp(n int) (userNs, sysNs float64) {
	f := float64(n)
	return float64(c.User.Nanoseconds()) / f, float64(c.Sys.Nanoseconds()) / f
}
