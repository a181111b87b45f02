//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package h1conn

// quiet falls back to a deadline peek where there is no raw socket read
// (see the Unix version); it finds what a TLS layer holds, but not what
// waits in the socket, so after a read that filled its buffer the socket
// is read for a moment too.
func (pc *Conn) quiet() bool {
	if !pc.aliveByDeadline() {
		return false
	}
	return !pc.readFilled || pc.quietForAWhile()
}

// tlsLayered reports whether pc's connection is TLS, so that records may
// wait inside the TLS layer (FitForReuse).
func (pc *Conn) tlsLayered() bool { return pc.tlsState != nil }

// socketHidden: here no socket is read directly, and connections are not
// watched while idle either; quiet's deadline peek is all (a FIN or bytes
// that arrived while idle are not seen before a request).
func (pc *Conn) socketHidden() bool { return false }
