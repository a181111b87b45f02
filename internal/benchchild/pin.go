package benchchild

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Placing the client and the server on separate cores.
//
// On a small machine an unpinned server child and the measuring process
// share all cores, and the scheduler decides, run by run, whether they
// meet on one core or not; the client's CPU per request then moves by a
// third between runs of the same binary and the ratios between clients
// with it. PERFORMANCE.md's anchors were measured with the server pinned to
// the other core; PinApart reproduces that set-up: the measuring process
// (all its threads, GOMAXPROCS) on every CPU it may use but the last, each
// child Start launches afterwards on the last one.

// PinEnv is the environment variable that turns the placement off:
// PinEnv=off leaves both processes where the kernel puts them.
const PinEnv = "FERRY_BENCH_PIN"

// placement is what PinApart decided; mu guards it. The zero value means
// unpinned: Start launches children with the parent's mask.
var placement struct {
	mu     sync.Mutex
	pinned bool
	client unix.CPUSet
	server unix.CPUSet
}

// PinApart pins this process to all of its allowed CPUs but the last and
// sets GOMAXPROCS to their number, and makes Start pin children to the last
// CPU. Call it from TestMain, before m.Run. It does nothing unless
// benchmarks were asked for (-test.bench; the description is then empty),
// PinEnv is not "off", and at least two CPUs are allowed (the description
// says which reason held). The description is meant for the benchmark log;
// an error means the process could not be pinned (it then runs unpinned).
func PinApart() (string, error) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return "", nil
	}
	if os.Getenv(PinEnv) == "off" {
		return PinEnv + "=off: client and server not pinned", nil
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return "", fmt.Errorf("benchchild: read CPU affinity: %w", err)
	}
	cpus := cpusOf(&allowed)
	if len(cpus) < 2 {
		return "one CPU allowed: client and server not pinned", nil
	}
	var client, server unix.CPUSet
	for _, c := range cpus[:len(cpus)-1] {
		client.Set(c)
	}
	server.Set(cpus[len(cpus)-1])
	if err := pinAllThreads(&client); err != nil {
		return "", err
	}
	runtime.GOMAXPROCS(client.Count())
	placement.mu.Lock()
	placement.pinned, placement.client, placement.server = true, client, server
	placement.mu.Unlock()
	return fmt.Sprintf("client pinned to CPUs %v (GOMAXPROCS %d), server children to CPU %d (%s=off to disable)",
		cpus[:len(cpus)-1], client.Count(), cpus[len(cpus)-1], PinEnv), nil
}

// cpusOf lists the CPUs in set, in increasing order.
func cpusOf(set *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// pinAllThreads sets the affinity of every thread of this process to set.
// A thread created while the list is walked inherits the mask of the thread
// that created it, which may not have been pinned yet, so the walk repeats
// until a pass finds every thread already pinned.
func pinAllThreads(set *unix.CPUSet) error {
	for pass := 0; pass < 10; pass++ {
		tids, err := threadIDs()
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err != nil {
				continue // the thread exited since the listing
			}
			if cur == *set {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return fmt.Errorf("benchchild: pin thread %d: %w", tid, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return errors.New("benchchild: threads kept appearing unpinned")
}

// threadIDs lists the thread IDs of this process.
func threadIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("benchchild: list threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// startPinned runs start (which forks the child) on a thread whose mask is,
// for that moment, the server CPU, so the child and every thread it creates
// run there. Without a placement it just runs start.
func startPinned(start func() error) error {
	placement.mu.Lock()
	pinned, client, server := placement.pinned, placement.client, placement.server
	placement.mu.Unlock()
	if !pinned {
		return start()
	}
	// The fork happens on the calling thread, so the child inherits this
	// thread's mask; the thread gets the client mask back afterwards.
	runtime.LockOSThread()
	if err := unix.SchedSetaffinity(0, &server); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("benchchild: pin child: %w", err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &client); rerr != nil {
		// Leave the thread locked: it dies with this goroutine instead of
		// running other goroutines on the server's CPU.
		return errors.Join(err, fmt.Errorf("benchchild: unpin parent thread: %w", rerr))
	}
	runtime.UnlockOSThread()
	return err
}
