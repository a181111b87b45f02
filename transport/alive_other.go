//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package transport

// alive falls back to a deadline peek where there is no raw socket peek.
func (pc *h1Conn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	return pc.aliveByDeadline()
}
