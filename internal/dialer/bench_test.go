//go:build linux

package dialer

import (
	"net"
	"net/netip"
	"testing"
)

// BenchmarkDial opens and closes one loopback TCP connection per iteration:
// ferry's DialAddrs (one address, Go's keep-alive defaults through the
// guard) against the baseline twin net.Dialer.DialContext with the same
// keep-alive default.
func BenchmarkDial(b *testing.B) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer func() {
		ln.Close()
		<-done
	}()
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	addrs := []netip.Addr{ap.Addr()}
	b.Run("ferry", func(b *testing.B) {
		d := &Dialer{}
		b.ReportAllocs()
		for b.Loop() {
			c, err := d.DialAddrs(b.Context(), addrs, ap.Port())
			if err != nil || c.Remote != ap {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	b.Run("netdialer", func(b *testing.B) {
		d := &net.Dialer{}
		addr := ap.String()
		b.ReportAllocs()
		for b.Loop() {
			c, err := d.DialContext(b.Context(), "tcp", addr)
			if err != nil || c.RemoteAddr().(*net.TCPAddr).AddrPort() != ap {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}
