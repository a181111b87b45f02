package h3conn

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHeadStart is how long a request waits for a QUIC dial before it
// goes over TCP: above a loopback or LAN handshake, below what a user
// notices, in the range browsers use.
const DefaultHeadStart = 275 * time.Millisecond

// Flights runs a transport's QUIC dials, "flights", on one Dialer: at most
// one at a time per group G (the transport's groups are origins: an origin
// whose Alt-Svc names a new alternative in every response still gets one
// dial at a time), at most Max at once over all groups. K names what a
// flight dials (an alternative of the origin); its waiters read it back
// (Flight.Key), since the group's flight may go to another alternative
// than the one a waiter looked up.
//
// A flight runs on its own goroutine with a context of its own (no
// request's cancellation; its trace hooks go to the request that started
// it, see DialEvents), bounded by the Dialer's handshake timeout and by
// CloseDialer. When the dial ends the flight hands the outcome to
// FlightJob.Landed, wakes its waiters, then calls FlightJob.Woken.
//
// The head start is the flight's, not each request's: it ends at a fixed
// time after the flight started, and a request that joins late waits only
// for what is left of it (Flight.Wait). So a network that drops UDP costs
// the head start once, however many requests arrive before the dial gives
// up.
//
// The Dialer is opened by the first flight (NewDialer) and closed by
// CloseDialer, which also abandons the handshakes in progress; the next
// flight opens a new one.
type Flights[G comparable, K any] struct {
	Max       int            // flights at once over all groups
	NewDialer func() *Dialer // opens the Dialer when a flight finds none

	mu     sync.Mutex // guards dialer, m and every Flight's landed
	dialer *flightDialer
	m      map[G]*Flight[K] // the flight in progress per group

	// now is the number of dials running (Dialer.Dial called and not
	// returned), peak its highest value.
	now, peak atomic.Int32
}

// flightDialer is one Dialer and the flights using it.
type flightDialer struct {
	d       *Dialer
	flights sync.WaitGroup
}

// Flight is one QUIC dial that requests may wait for.
type Flight[K any] struct {
	Key      K             // what the flight dials
	done     chan struct{} // closed when the dial ended and err is set
	deadline time.Time     // end of the head start
	events   *DialEvents   // the starter's hooks; nil: none
	err      error
	landed   bool // the outcome went to Landed (Flights.mu)
}

// FlightJob is what a new flight dials and whom it tells the outcome.
type FlightJob struct {
	Host, Addr string        // Dialer.Dial's: the origin host, the alternative's address
	HeadStart  time.Duration // 0: DefaultHeadStart
	Events     *DialEvents   // the starting request's hooks; nil: none
	// Landed gets the outcome on the flight's goroutine before the waiters
	// wake; Woken (may be nil) after.
	Landed, Woken func(*Conn, error)
}

// Find returns g's flight in progress, or nil; full reports that Max
// flights are running.
func (fs *Flights[G, K]) Find(g G) (f *Flight[K], full bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[g], len(fs.m) >= fs.Max
}

// Start returns g's flight in progress (started false) or starts job as
// g's flight to key (started true), unless Max flights are running: then
// it returns nil.
func (fs *Flights[G, K]) Start(g G, key K, job FlightJob) (f *Flight[K], started bool) {
	fs.mu.Lock()
	if f := fs.m[g]; f != nil {
		fs.mu.Unlock()
		return f, false
	}
	if len(fs.m) >= fs.Max {
		fs.mu.Unlock()
		return nil, false
	}
	if fs.dialer == nil {
		fs.dialer = &flightDialer{d: fs.NewDialer()}
	}
	if fs.m == nil {
		fs.m = make(map[G]*Flight[K])
	}
	dl := fs.dialer
	headStart := job.HeadStart
	if headStart <= 0 {
		headStart = DefaultHeadStart
	}
	f = &Flight[K]{Key: key, done: make(chan struct{}), deadline: time.Now().Add(headStart), events: job.Events}
	fs.m[g] = f
	dl.flights.Add(1)
	fs.mu.Unlock()
	go fs.run(dl, g, f, job)
	return f, true
}

func (fs *Flights[G, K]) run(dl *flightDialer, g G, f *Flight[K], job FlightJob) {
	defer dl.flights.Done()
	ctx := context.Background()
	if f.events != nil {
		ctx = httptrace.WithClientTrace(ctx, f.events.Hooks())
	}
	n := fs.now.Add(1)
	for p := fs.peak.Load(); n > p && !fs.peak.CompareAndSwap(p, n); p = fs.peak.Load() {
	}
	c, err := dl.d.Dial(ctx, job.Host, job.Addr)
	fs.now.Add(-1)
	fs.mu.Lock()
	f.landed = true
	fs.mu.Unlock()
	job.Landed(c, err)
	fs.mu.Lock()
	if fs.m[g] == f {
		delete(fs.m, g)
	}
	f.err = err
	fs.mu.Unlock()
	close(f.done)
	if job.Woken != nil {
		job.Woken(c, err)
	}
}

// Running returns the number of flights in progress and how many of them
// have not landed yet (their dial runs or their outcome is not handed to
// Landed): a landed one's connection is the transport's to count.
func (fs *Flights[G, K]) Running() (n, dialling int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.m {
		if !f.landed {
			dialling++
		}
	}
	return len(fs.m), dialling
}

// Dialer returns the open Dialer, or nil.
func (fs *Flights[G, K]) Dialer() *Dialer {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.dialer == nil {
		return nil
	}
	return fs.dialer.d
}

// Peak returns the highest number of dials that ran at once.
func (fs *Flights[G, K]) Peak() int { return int(fs.peak.Load()) }

// CloseDialer closes the Dialer, with its UDP socket and the connections
// it made, abandoning the handshakes in progress (their dials fail with
// ErrDialerClosed), and waits for their flights to end. The transport calls
// it once it has no connection left in use.
func (fs *Flights[G, K]) CloseDialer() {
	fs.mu.Lock()
	dl := fs.dialer
	fs.dialer = nil
	fs.mu.Unlock()
	if dl != nil {
		dl.d.Close()
		dl.flights.Wait()
	}
}

// Done is closed when the dial ended; Err is then its error.
func (f *Flight[K]) Done() <-chan struct{} { return f.done }

// Err is the dial's error, once Done is closed.
func (f *Flight[K]) Err() error { return f.err }

// HeadStartLeft is what is left of the flight's head start.
func (f *Flight[K]) HeadStartLeft() time.Duration { return time.Until(f.deadline) }

// Wait waits for f to end until its head start is over, firing the dial's
// hooks (ev, nil when another request started f) on the caller's goroutine
// meanwhile. It reports whether f ended; if not, err is why the request
// stopped waiting (nil when the head start ran out, else the request's
// context's cause, or canceled when req.Cancel fired) and ev's open phases
// were closed with late or that error. after makes the timer (nil:
// time.NewTimer); tests inject a clock.
func (f *Flight[K]) Wait(req *http.Request, ev *DialEvents, after func(time.Duration) (<-chan time.Time, func() bool), late, canceled error) (done bool, err error) {
	if after == nil {
		after = newTimer
	}
	timeout, stop := after(f.HeadStartLeft())
	defer stop()
	ctx := req.Context()
	for {
		select {
		case <-f.done:
			ev.Drain()
			return true, nil
		case e := <-ev.Events():
			ev.Fire(e)
		case <-timeout:
			ev.Abandon(late)
			return false, nil
		case <-ctx.Done():
			err := context.Cause(ctx)
			ev.Abandon(err)
			return false, err
		case <-req.Cancel:
			ev.Abandon(canceled)
			return false, canceled
		}
	}
}

func newTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
