//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package h1conn

// quiet falls back to a deadline peek where there is no raw socket read
// (see the Unix version).
func (pc *Conn) quiet() bool {
	return pc.aliveByDeadline()
}

// socketHidden: here no socket is read directly, and connections are not
// watched while idle either; quiet's deadline peek is all (a FIN or bytes
// that arrived while idle are not seen before a request).
func (pc *Conn) socketHidden() bool { return false }
