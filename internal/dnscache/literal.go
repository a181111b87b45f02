package dnscache

import (
	"net/netip"
	"strings"
)

// ParseIPLiteral reports whether host is an IP address literal (IPv4,
// IPv6, optionally with a zone) and returns it with IPv4-mapped addresses
// unmapped. Names are rejected by a byte scan before netip.ParseAddr runs,
// so a name costs no allocation (ParseAddr allocates its error).
func ParseIPLiteral(host string) (netip.Addr, bool) {
	if !maybeIP(host) {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// maybeIP is true for anything with a colon (IPv6) and for strings made
// only of digits and dots (IPv4); DNS names have a non-numeric last label.
func maybeIP(host string) bool {
	if host == "" {
		return false
	}
	if strings.IndexByte(host, ':') >= 0 {
		return true
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
