//go:build linux

package sockopt

import "testing"

// BenchmarkGuardSet sets the same TOS on one connection b.N times: guarded
// through a Guard, unguarded with a bare setsockopt each time (what a
// per-request re-apply costs). setsockopt/op counts the syscalls made.
func BenchmarkGuardSet(b *testing.B) {
	b.Run("guarded", func(b *testing.B) {
		c := loopbackConn(b, "tcp4")
		cs := &countingSetter{}
		g, err := NewGuardWithSetter(c, cs.set)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := g.Set(TOS, 0x10); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cs.calls)/float64(b.N), "setsockopt/op")
	})
	b.Run("unguarded", func(b *testing.B) {
		c := loopbackConn(b, "tcp4")
		raw, err := c.SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		cs := &countingSetter{}
		fam := FamilyIPv4
		var setErr error
		set := func(fd uintptr) { setErr = cs.set(fd, fam, TOS, 0x10) }
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := raw.Control(set); err != nil || setErr != nil {
				b.Fatal(err, setErr)
			}
		}
		b.ReportMetric(float64(cs.calls)/float64(b.N), "setsockopt/op")
	})
}
