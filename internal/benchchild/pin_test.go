package benchchild

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns this process's CPU mask and its CPUs, skipping the
// test on a one-CPU machine (nothing to place apart there).
func allowedCPUs(t *testing.T) (unix.CPUSet, []int) {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpus := cpusOf(&set)
	if len(cpus) < 2 {
		t.Skip("only one CPU allowed: placement is a no-op here")
	}
	return set, cpus
}

// threadMasks maps each distinct mask among pid's threads to how many
// threads have it.
func threadMasks(t *testing.T, pid int) map[unix.CPUSet]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	masks := map[unix.CPUSet]int{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		var m unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &m); err != nil {
			continue
		}
		masks[m]++
	}
	return masks
}

// TestStartPinsChildApart: with a placement set, the child and all of its
// threads run on the server CPU, and no thread of this process is left on
// the server's mask by the fork.
func TestStartPinsChildApart(t *testing.T) {
	orig, cpus := allowedCPUs(t)
	var server unix.CPUSet
	server.Set(cpus[len(cpus)-1])
	placement.mu.Lock()
	placement.pinned, placement.client, placement.server = true, orig, server
	placement.mu.Unlock()
	defer func() {
		placement.mu.Lock()
		placement.pinned = false
		placement.mu.Unlock()
	}()

	addr, stop, err := Start(testEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if addr == "" {
		t.Fatal("no address announced")
	}
	pid := 0
	mu.Lock()
	for cmd := range children {
		pid = cmd.Process.Pid
	}
	mu.Unlock()
	childMasks := threadMasks(t, pid)
	if len(childMasks) != 1 || childMasks[server] == 0 {
		t.Fatalf("child threads' masks %v, want all %v", childMasks, cpusOf(&server))
	}
	if own := threadMasks(t, os.Getpid()); own[server] > 0 && server != orig {
		t.Fatalf("%d threads of the parent left on the server's CPU", own[server])
	}
}

// TestPinAllThreads: every thread of the process gets the mask, and the
// original mask can be put back the same way.
func TestPinAllThreads(t *testing.T) {
	orig, cpus := allowedCPUs(t)
	var first unix.CPUSet
	first.Set(cpus[0])
	if err := pinAllThreads(&first); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pinAllThreads(&orig); err != nil {
			t.Errorf("restore: %v", err)
		}
	}()
	masks := threadMasks(t, os.Getpid())
	if len(masks) != 1 || masks[first] == 0 {
		t.Fatalf("threads' masks %v, want all on CPU %d", masks, cpus[0])
	}
}

// TestPinApartOnlyForBenchmarks: without -test.bench nothing is pinned and
// nothing is said.
func TestPinApartOnlyForBenchmarks(t *testing.T) {
	if f := flag.Lookup("test.bench"); f != nil && strings.TrimSpace(f.Value.String()) != "" {
		t.Skip("benchmarks requested in this run")
	}
	note, err := PinApart()
	if err != nil || note != "" {
		t.Fatalf("PinApart = %q, %v; want nothing done", note, err)
	}
	placement.mu.Lock()
	defer placement.mu.Unlock()
	if placement.pinned {
		t.Fatal("placement set without benchmarks")
	}
}
