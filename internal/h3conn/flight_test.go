package h3conn

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// flightLog records the outcomes a flight hands to its job, and whether
// its waiters were already woken when each arrived.
type flightLog struct {
	mu     sync.Mutex // guards the fields below
	events []string
	conns  []*Conn
	errs   []error
	ready  chan struct{} // closed by the test once Start returned
	ended  chan struct{} // closed by Woken
}

func newFlightLog() *flightLog {
	return &flightLog{ready: make(chan struct{}), ended: make(chan struct{})}
}

// job returns a FlightJob to addr whose hooks record into l; they read f
// once the test closed l.ready, after Start returned it.
func (l *flightLog) job(addr string, headStart time.Duration, f **Flight[string]) FlightJob {
	record := func(name string) func(*Conn, error) {
		return func(c *Conn, err error) {
			<-l.ready
			woken := "waiters asleep"
			select {
			case <-(*f).Done():
				woken = "waiters woken"
			default:
			}
			l.mu.Lock()
			l.events = append(l.events, name+" ("+woken+")")
			l.conns, l.errs = append(l.conns, c), append(l.errs, err)
			l.mu.Unlock()
			if name == "woken" {
				close(l.ended)
			}
		}
	}
	return FlightJob{Host: "localhost", Addr: addr, HeadStart: headStart, Landed: record("landed"), Woken: record("woken")}
}

// startLogged starts group's flight to addr on fs, with a minute's head
// start and its outcomes recorded in the returned log.
func startLogged(t *testing.T, fs *Flights[string, string], group, addr string) (*Flight[string], *flightLog) {
	t.Helper()
	var f *Flight[string]
	log := newFlightLog()
	f, started := fs.Start(group, "alt-1", log.job(addr, time.Minute, &f))
	close(log.ready)
	if !started || f == nil {
		t.Fatalf("Start for %s: %v, started %v; want a new flight", group, f, started)
	}
	return f, log
}

func (l *flightLog) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the flight did not end")
	}
}

// TestFlightsOneDialPerGroup: a second Start in a group joins the flight
// in progress (even to another key), another group gets its own, and no
// flight starts beyond Max; CloseDialer abandons them with ErrDialerClosed,
// handed to Landed before the waiters wake.
func TestFlightsOneDialPerGroup(t *testing.T) {
	bh := startBlackhole(t)
	fs := &Flights[string, string]{Max: 2, NewDialer: func() *Dialer { return NewDialer(Config{HandshakeTimeout: time.Minute}) }}
	a, logA := startLogged(t, fs, "origin-a", bh.addr())
	if f, started := fs.Start("origin-a", "alt-2", FlightJob{}); f != a || started {
		t.Fatalf("Start in a group with a flight: %v, started %v; want its flight joined", f, started)
	}
	if f, full := fs.Find("origin-a"); f != a || full {
		t.Fatalf("Find: %v, full %v; want the flight, not full", f, full)
	}
	b, logB := startLogged(t, fs, "origin-b", bh.addr())
	if b == a {
		t.Fatal("another group did not get a flight of its own")
	}
	if f, started := fs.Start("origin-c", "alt-1", FlightJob{}); f != nil || started {
		t.Fatalf("Start beyond Max: %v, started %v; want none", f, started)
	}
	if _, full := fs.Find("origin-c"); !full {
		t.Fatal("Find does not report Max flights running")
	}
	if n, dialling := fs.Running(); n != 2 || dialling != 2 {
		t.Fatalf("Running = %d, %d dialling; want 2, 2", n, dialling)
	}
	if a.Key != "alt-1" || a.HeadStartLeft() <= 0 {
		t.Fatalf("flight key %q, head start left %v", a.Key, a.HeadStartLeft())
	}
	// Both dials hang on the blackhole: both run at once, once their
	// goroutines started.
	for deadline := time.Now().Add(10 * time.Second); fs.Peak() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Peak = %d after 10s with two dials hanging, want 2", fs.Peak())
		}
	}
	fs.CloseDialer()
	logA.wait(t)
	logB.wait(t)
	for _, l := range []*flightLog{logA, logB} {
		want := []string{"landed (waiters asleep)", "woken (waiters woken)"}
		if len(l.events) != 2 || l.events[0] != want[0] || l.events[1] != want[1] {
			t.Errorf("hooks ran as %q, want %q", l.events, want)
		}
		if !errors.Is(l.errs[0], ErrDialerClosed) {
			t.Errorf("abandoned dial's outcome: %v, want ErrDialerClosed", l.errs[0])
		}
	}
	if !errors.Is(a.Err(), ErrDialerClosed) {
		t.Errorf("Flight.Err = %v, want ErrDialerClosed", a.Err())
	}
	if n, _ := fs.Running(); n != 0 || fs.Dialer() != nil {
		t.Errorf("after CloseDialer: %d flights, dialer %v; want none", n, fs.Dialer())
	}
}

// TestFlightWaitEndsWithHeadStart: a waiter of a dial that does not answer
// stops when the head start ends, with no error (the request goes over
// TCP) and the dial going on; a request cancelled by Request.Cancel stops
// with the error it is given.
func TestFlightWaitEndsWithHeadStart(t *testing.T) {
	bh := startBlackhole(t)
	fs := &Flights[string, string]{Max: 8, NewDialer: func() *Dialer { return NewDialer(Config{HandshakeTimeout: time.Minute}) }}
	defer fs.CloseDialer()
	f, _ := startLogged(t, fs, "origin", bh.addr())
	req, _ := http.NewRequest("GET", "https://origin/", nil)
	var asked time.Duration
	fired := make(chan time.Time, 1)
	fired <- time.Time{}
	after := func(d time.Duration) (<-chan time.Time, func() bool) {
		asked = d
		return fired, func() bool { return true }
	}
	late, canceled := errors.New("late"), errors.New("canceled")
	done, err := f.Wait(req, nil, after, late, canceled)
	if done || err != nil {
		t.Fatalf("Wait after the head start: done %v, err %v; want false, nil", done, err)
	}
	if asked <= 0 || asked > time.Minute {
		t.Fatalf("Wait timed %v, want what is left of the minute's head start", asked)
	}
	if n, _ := fs.Running(); n != 1 {
		t.Fatalf("%d flights after the waiter left, want the dial going on", n)
	}
	cancel := make(chan struct{})
	close(cancel)
	req.Cancel = cancel
	if done, err := f.Wait(req, nil, nil, late, canceled); done || err != canceled {
		t.Fatalf("Wait with Request.Cancel fired: done %v, err %v; want false, %v", done, err, canceled)
	}
}

// TestFlightLandsConnection: a dial to a live server hands its connection
// to Landed, then its waiter wakes with the flight done and no error.
func TestFlightLandsConnection(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	fs := &Flights[string, string]{Max: 8, NewDialer: func() *Dialer { return newTestDialer(t, s, nil) }}
	defer fs.CloseDialer()
	f, log := startLogged(t, fs, "origin", s.addr())
	req, _ := http.NewRequest("GET", "https://localhost/", nil)
	if done, err := f.Wait(req, nil, nil, nil, nil); !done || err != nil {
		t.Fatalf("Wait: done %v, err %v; want the dial done", done, err)
	}
	if f.Err() != nil {
		t.Fatalf("Flight.Err = %v", f.Err())
	}
	log.wait(t)
	if len(log.conns) != 2 || log.conns[0] == nil || !log.conns[0].Usable() || log.errs[0] != nil {
		t.Fatalf("Landed got %v, %v; want a usable connection", log.conns, log.errs)
	}
	if log.events[0] != "landed (waiters asleep)" {
		t.Fatalf("hooks ran as %q; want Landed before the waiters wake", log.events)
	}
}
