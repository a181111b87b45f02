package h1conn

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// A request body that is a file, with a declared length, goes to the
// connection's own ReadFrom as net/http sends it: over plain TCP (or a Unix
// socket) on Linux the kernel copies it with sendfile, without a read and a
// write through user space per 32 KiB. ferry also finds the file inside
// io.NopCloser, where net/http does not (its request wrapper hides the
// NopCloser from its own unwrapping). A chunked body is copied through user
// space, chunk by chunk, by both.

// fileBody returns the file a request body is, itself or inside
// io.NopCloser; nil for any other body.
func fileBody(body io.Reader) *os.File {
	switch b := body.(type) {
	case *os.File:
		return b
	case nil:
		return nil
	}
	if inner, ok := unwrapNopCloser(body); ok {
		f, _ := inner.(*os.File)
		return f
	}
	return nil
}

// kernelCopyFile returns the file o's body is when the connection can take
// it through its ReadFrom (not TLS), nil otherwise. Only a body not known to
// be in memory (streamBody) is looked at, so the common small body costs
// nothing here.
func (pc *Conn) kernelCopyFile(o *Outgoing) *os.File {
	if !o.streamBody {
		return nil
	}
	if _, ok := pc.conn.(io.ReaderFrom); !ok {
		return nil
	}
	return fileBody(o.Body)
}

// copyFileBody sends n bytes of f (fewer if it ends first) through the
// connection's ReadFrom once what is buffered is flushed. It is used only
// when the connection has a ReadFrom (not TLS). The body's own errors keep
// their requestBodyReadError tag, whichever way ReadFrom copies it, and
// come back untagged of the connection's wrapping (*net.OpError "readfrom")
// as the caller's error, as a copy through copyBody returns them. An error
// of the sendfile call itself is taken as the body's too, as net/http
// takes every error of its body copy: it cannot be told apart from a read
// error of the file (EBADF, EIO), and taking that for the connection's left
// RoundTrip waiting for an answer the server could only give after the
// body (TestFileBodyUnreadableNoHang). Except ECONNRESET and EPIPE,
// which only a socket gives: the connection failed, and an answer the
// server sent before closing is still returned, as for a body copied
// through user space.
func (pc *Conn) copyFileBody(f *os.File, n int64) (int64, error) {
	if err := pc.bw.Flush(); err != nil {
		return 0, err
	}
	lr := &io.LimitedReader{R: fileBodyReader{f}, N: n}
	written, err := pc.bw.ReadFrom(lr)
	if err == nil {
		return written, nil
	}
	if bre, ok := errors.AsType[requestBodyReadError](err); ok {
		return written, bre
	}
	if se, ok := errors.AsType[*os.SyscallError](err); ok && se.Syscall == "sendfile" {
		if errors.Is(se.Err, syscall.ECONNRESET) || errors.Is(se.Err, syscall.EPIPE) {
			// Only the socket gives these: the server closed or reset the
			// connection (often after answering early), so the answer may
			// still be read (TestFileBodyEarlyAnswerClose).
			return written, err
		}
		return written, requestBodyReadError{err}
	}
	return written, err
}

// fileBodyReader is a file request body as the connection's ReadFrom sees
// it: sendfile finds the file's descriptor through SyscallConn (the net
// package takes any syscall.Conn), and a copy through user space (a file
// sendfile refuses, such as a pipe) reads it through Read, whose errors are
// tagged as the body's.
type fileBodyReader struct{ f *os.File }

func (r fileBodyReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	if err != nil && err != io.EOF {
		err = requestBodyReadError{err}
	}
	return n, err
}

func (r fileBodyReader) SyscallConn() (syscall.RawConn, error) { return r.f.SyscallConn() }
