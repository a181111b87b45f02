//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package transport

// quiet falls back to a deadline peek where there is no raw socket read
// (see the Unix version).
func (pc *h1Conn) quiet() bool {
	return pc.aliveByDeadline()
}
