package sockio

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
)

// Conn is a *net.TCPConn whose Read and Write make raw system calls (see
// the package documentation).
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// read and write hold the state of the call in progress in each
	// direction, so that a call allocates nothing; a second concurrent
	// call in the same direction (rare: the net package serialises them
	// on the socket anyway) takes a fresh op.
	read, write op
}

// Wrap returns c as a *Conn when c is a *net.TCPConn and raw socket I/O is
// on (Enabled), otherwise c itself. Its errors name the network "tcp", as
// those of a connection dialled with network "tcp" (ferry's dials) do.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || !enabled.Load() {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	sc := &Conn{TCPConn: tc, rc: rc}
	sc.read.init(false)
	sc.write.init(true)
	return sc
}

// NetConn returns the wrapped *net.TCPConn.
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Unwrap returns the *net.TCPConn under c when c is a *Conn, and c itself
// otherwise: the connection as dialled, for callers who are shown it (as
// httptrace's GotConn shows a cleartext connection) while its reads and
// writes go through the wrapper.
func Unwrap(c net.Conn) net.Conn {
	if sc, ok := c.(*Conn); ok {
		return sc.TCPConn
	}
	return c
}

// Read reads into p as (*net.TCPConn).Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.run(&c.read, p)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

// Write writes all of p as (*net.TCPConn).Write does, or fails with how
// much of it was written.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return c.run(&c.write, p)
}

// run makes the call described by o's direction on p through the
// socket's poller: o.step runs each time the socket may be ready.
func (c *Conn) run(o *op, p []byte) (int, error) {
	if !o.busy.CompareAndSwap(false, true) {
		o = newOp(o.writes)
		o.busy.Store(true)
	}
	o.p, o.n, o.errno, o.zeroWrite = p, 0, 0, false
	var err error
	if o.writes {
		err = c.rc.Write(o.stepFn)
	} else {
		err = c.rc.Read(o.stepFn)
	}
	n, errno, zeroWrite := o.n, o.errno, o.zeroWrite
	o.p = nil
	o.busy.Store(false)
	if err == nil && errno == 0 && !zeroWrite {
		return n, nil
	}
	name := "read"
	if o.writes {
		name = "write"
	}
	if err == nil && zeroWrite {
		err = io.ErrUnexpectedEOF
	} else if err == nil {
		err = os.NewSyscallError(name, errno)
	} else if oe, ok := err.(*net.OpError); ok {
		// RawConn reports a closed socket or a passed deadline as a
		// "raw-read"/"raw-write" OpError; the TCPConn names the call.
		err = oe.Err
	}
	return n, &net.OpError{Op: name, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// op is one direction's call state: the buffer, what was done with it,
// and the step function the poller calls, made once.
type op struct {
	busy      atomic.Bool // set while a call uses p, n, errno and zeroWrite
	writes    bool
	p         []byte
	n         int
	errno     syscall.Errno
	zeroWrite bool // write(2) returned 0 with no error
	stepFn    func(fd uintptr) bool
}

func newOp(writes bool) *op {
	o := &op{}
	o.init(writes)
	return o
}

func (o *op) init(writes bool) {
	o.writes = writes
	o.stepFn = o.step
}

// step makes the read (once) or the writes (until all of p is written)
// on fd; it returns false to wait for the socket when the kernel would
// block (EAGAIN), true when the call is done, with o.n and o.errno set.
func (o *op) step(fd uintptr) bool {
	for {
		var r int
		var errno syscall.Errno
		if o.writes {
			r, errno = sysWrite(fd, o.p[o.n:])
		} else {
			r, errno = sysRead(fd, o.p)
		}
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			o.errno = errno
			return true
		}
		if o.writes && r == 0 {
			// write(2) took nothing and reported nothing: not expected of
			// a socket; fail rather than spin (as the net package does).
			o.zeroWrite = true
			return true
		}
		o.n += r
		if !o.writes || o.n == len(o.p) {
			return true
		}
	}
}
