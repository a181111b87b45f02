package h3conn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// pathShape is how a shapedRelay treats the datagrams of one direction: a
// delay drawn from [minDelay, maxDelay] (the datagrams of a direction keep
// their order, as in a queue), a share of them dropped at random (never
// more than maxLossRun in a row when it is set), and reversed bursts:
// every `reverse` datagrams are delivered last first.
type pathShape struct {
	minDelay, maxDelay time.Duration
	drop               float64
	maxLossRun         int
	reverse            int
}

// shapedRelay is a testpeer.UDPRelay through a working but bad path: each
// direction has a pathShape (set at any time) drawn from its own seeded
// source, and hold pauses all traffic, delivering it when released.
type shapedRelay struct {
	*testpeer.UDPRelay
	up, down *shapedDir
	wg       sync.WaitGroup // the delivery goroutines
}

type shapedDir struct {
	out   chan shapedPacket // to the delivery goroutine, in order
	mu    sync.Mutex        // guards the fields below; held for no I/O
	shape pathShape
	rng   *rand.Rand
	held  bool
	queue [][]byte     // held, or waiting to be reversed
	send  func([]byte) // the relay's delivery, given with each datagram
	// closed is set when out is closed (the relay is closing).
	closed bool
	// burst is set while a reversed burst is pending: a timer delivers it
	// if it does not fill up soon.
	burst bool
	// dropped and passed count datagrams for the test's log; lossRun
	// counts those dropped since the last one passed.
	dropped, passed, lossRun int
}

type shapedPacket struct {
	due  time.Time
	b    []byte
	send func([]byte)
}

func startShapedRelay(t testing.TB, server string, seed uint64) *shapedRelay {
	t.Helper()
	r := &shapedRelay{
		up:   &shapedDir{out: make(chan shapedPacket, 4096), rng: rand.New(rand.NewPCG(seed, 1))},
		down: &shapedDir{out: make(chan shapedPacket, 4096), rng: rand.New(rand.NewPCG(seed, 2))},
	}
	r.wg.Add(2)
	go r.up.deliver(&r.wg)
	go r.down.deliver(&r.wg)
	r.UDPRelay = testpeer.StartUDPRelayVia(t, server, r.up.take, r.down.take)
	t.Cleanup(func() {
		r.Close() // no take after it: the delivery goroutines can end
		r.up.close()
		r.down.close()
		r.wg.Wait()
		up, down := r.up.counts(), r.down.counts()
		t.Logf("relay: up passed %d dropped %d, down passed %d dropped %d", up[0], up[1], down[0], down[1])
	})
	return r
}

// setShape sets both directions' shape.
func (r *shapedRelay) setShape(s pathShape) {
	for _, d := range []*shapedDir{r.up, r.down} {
		d.mu.Lock()
		d.shape = s
		d.mu.Unlock()
	}
}

// hold pauses (true) or resumes (false) all traffic; on resume what was
// held is delivered, in order, after the shape's delay.
func (r *shapedRelay) hold(on bool) {
	for _, d := range []*shapedDir{r.up, r.down} {
		d.mu.Lock()
		d.held = on
		var flush [][]byte
		if !on {
			flush, d.queue = d.queue, nil
		}
		for _, b := range flush {
			d.sendLocked(b) // a channel send with room: no blocking
		}
		d.mu.Unlock()
	}
}

// counts returns the datagrams passed and dropped so far.
func (d *shapedDir) counts() [2]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return [2]int{d.passed, d.dropped}
}

// take decides the fate of one datagram, which send delivers.
func (d *shapedDir) take(b []byte, send func([]byte)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.send = send
	if d.shape.drop > 0 && d.rng.Float64() < d.shape.drop &&
		(d.shape.maxLossRun == 0 || d.lossRun < d.shape.maxLossRun) {
		d.dropped++
		d.lossRun++
		return
	}
	d.lossRun = 0
	d.passed++
	if d.held {
		d.queue = append(d.queue, b)
		return
	}
	if d.shape.reverse > 1 {
		d.queue = append(d.queue, b)
		if len(d.queue) >= d.shape.reverse {
			d.flushReversedLocked()
		} else if !d.burst {
			d.burst = true
			time.AfterFunc(20*ms, func() {
				d.mu.Lock()
				if d.burst && !d.held {
					d.flushReversedLocked()
				}
				d.mu.Unlock()
			})
		}
		return
	}
	d.sendLocked(b)
}

// flushReversedLocked delivers the pending burst last first; d.mu is held.
func (d *shapedDir) flushReversedLocked() {
	q := d.queue
	d.queue, d.burst = nil, false
	for i := len(q) - 1; i >= 0; i-- {
		d.sendLocked(q[i])
	}
}

// close ends the delivery goroutine once the reading one is done.
func (d *shapedDir) close() {
	d.mu.Lock()
	d.closed = true
	close(d.out)
	d.mu.Unlock()
}

// sendLocked queues b for delivery after a delay drawn from the shape;
// d.mu is held. A full queue drops b, as a router's would.
func (d *shapedDir) sendLocked(b []byte) {
	if d.closed {
		return
	}
	delay := d.shape.minDelay
	if span := d.shape.maxDelay - d.shape.minDelay; span > 0 {
		delay += time.Duration(d.rng.Int64N(int64(span)))
	}
	select {
	case d.out <- shapedPacket{due: time.Now().Add(delay), b: b, send: d.send}:
	default:
		d.dropped++
	}
}

// deliver writes the datagrams when they are due, in order.
func (d *shapedDir) deliver(wg *sync.WaitGroup) {
	defer wg.Done()
	for p := range d.out {
		if w := time.Until(p.due); w > 0 {
			time.Sleep(w)
		}
		p.send(p.b)
	}
}

// shapedTest dials a Conn through a shaped relay (on a clean path, so that
// the RTT estimate is loopback's), then shapes the path and runs requests
// on it for a while, concurrently: on a path that works, however badly,
// none is judged dead.
func shapedTest(t *testing.T, seed uint64, shape pathShape, during func(r *shapedRelay)) {
	s := startH3(t, holdHandler(nil, 300*ms), "localhost")
	relay := startShapedRelay(t, s.addr(), seed)
	var rec deadPathRecorder
	d := newTestDialer(t, s, func(c *Config) {
		c.OnPathDead = rec.record
		c.IdleTimeout = time.Minute
	})
	c, err := d.Dial(context.Background(), "localhost", relay.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
	defer cancel()
	if body, err := get(ctx, c, "/"); err != nil || body != "ok" {
		t.Fatalf("on the clean path: %q %v", body, err)
	}
	// Let everything sent so far be acknowledged, so that the first
	// answer after the shape change takes a whole round trip.
	time.Sleep(300 * ms)
	relay.setShape(shape)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				path := "/"
				if (i+j)%2 == 1 {
					path = "/slow"
				}
				if body, err := get(ctx, c, path); err != nil || body != "ok" {
					errs <- fmt.Errorf("request %d.%d %s: %q %v", i, j, path, body, err)
					return
				}
			}
		}()
	}
	if during != nil {
		during(relay)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if errors.Is(err, ErrPathDead) {
			t.Error("working path judged dead: ", err)
		} else {
			t.Error(err)
		}
	}
	if n := len(rec.calls()); n != 0 || c.PathDead() {
		st := c.q.ConnectionStats()
		t.Fatalf("working path judged dead (OnPathDead calls %d; srtt %v, rttvar %v)", n, st.SmoothedRTT, st.MeanDeviation)
	}
}

func TestShapedPathDelay(t *testing.T) {
	shapedTest(t, 1, pathShape{minDelay: 150 * ms, maxDelay: 400 * ms}, nil)
}

// TestShapedPathSuddenDelay: the RTT grows at once from loopback's to
// 800 ms (400 ms each way), below the threshold's floor: not dead.
func TestShapedPathSuddenDelay(t *testing.T) {
	shapedTest(t, 2, pathShape{minDelay: 400 * ms, maxDelay: 400 * ms}, nil)
}

// lossyPathMaxRun bounds the datagrams a lossy but working path drops in a
// row in one direction. Unbounded random loss has runs long enough to
// silence the path for the judge's four probe timeouts (quic-go sends two
// probes at each): at 40% loss each way, the seeded sequence of
// TestShapedPathLoss/0.4 drops 8 of 10 upstream datagrams in one stretch,
// and one CI run had that connection judged dead (40 local runs without
// the bound passed; presumably that run's probes fell in the stretch: the
// test's timing decides which datagrams they are). Such a stretch is the
// silence the judge is meant to take for a dead path, not a path that
// works.
const lossyPathMaxRun = 3

func TestShapedPathLoss(t *testing.T) {
	for _, drop := range []float64{0.2, 0.3, 0.4} {
		t.Run(fmt.Sprint(drop), func(t *testing.T) {
			shapedTest(t, uint64(drop*100), pathShape{drop: drop, maxLossRun: lossyPathMaxRun}, nil)
		})
	}
}

func TestShapedPathDelayAndLoss(t *testing.T) {
	shapedTest(t, 7, pathShape{minDelay: 150 * ms, maxDelay: 400 * ms, drop: 0.3, maxLossRun: lossyPathMaxRun}, nil)
}

func TestShapedPathReorder(t *testing.T) {
	shapedTest(t, 3, pathShape{minDelay: 20 * ms, maxDelay: 50 * ms, reverse: 4}, nil)
}

// TestShapedPathPause: all traffic held for less than the threshold, then
// delivered.
func TestShapedPathPause(t *testing.T) {
	shapedTest(t, 5, pathShape{}, func(r *shapedRelay) {
		time.Sleep(100 * ms)
		r.hold(true)
		time.Sleep(700 * ms)
		r.hold(false)
	})
}

// TestShapedPathSuddenRTT: the RTT estimate is loopback's (under a
// millisecond, so the threshold is its floor, deadMinDuration), and then
// the path's RTT grows at once to 2 s, as a 3G radio waking from idle or a
// bufferbloated queue filling up does. Every packet gets through, but the
// first answer comes later than the threshold's floor: the connection is
// judged dead and its requests fail, though the path works. (At 1.2 s it
// fails too, but near the floor the outcome depends on the looks' timing.)
func TestShapedPathSuddenRTT(t *testing.T) {
	t.Skip("known issue: a working path whose RTT grows at once beyond the threshold computed from the old estimate " +
		"(its floor deadMinDuration, 1 s, on a fast path) is judged dead before the first answer brings a new RTT sample; " +
		"see CHANGELOG, Known issues")
	shapedTest(t, 11, pathShape{minDelay: time.Second, maxDelay: time.Second}, nil)
}
