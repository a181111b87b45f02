package proccost

import (
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSinceCountsWork: 100 write syscalls and a busy loop show up in the
// difference of two readings (Linux, where /proc/self/io exists).
func TestSinceCountsWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("read/write syscalls come from /proc/self/io, Linux only")
	}
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := Read()
	for range 100 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	x := 0
	for i := range 20_000_000 {
		x += i
	}
	_ = x
	d := Since(before)
	if d.RW < 100 {
		t.Fatalf("%d read/write syscalls counted for 100 writes", d.RW)
	}
	if d.CPU <= 0 {
		t.Fatalf("CPU %v after a busy loop", d.CPU)
	}
	cpuNs, _, rw := d.PerOp(100)
	if rw < 1 || cpuNs <= 0 {
		t.Fatalf("PerOp(100) = cpu %v ns, rw %v", cpuNs, rw)
	}
	// The busy loop is user time; the split adds up to the total.
	if d.User <= 0 || d.User+d.Sys != d.CPU {
		t.Fatalf("user %v + sys %v, want a positive user time adding up to CPU %v", d.User, d.Sys, d.CPU)
	}
	if u, s := d.UserSysPerOp(100); u <= 0 || u+s <= 0 {
		t.Fatalf("UserSysPerOp(100) = %v, %v", u, s)
	}
}
