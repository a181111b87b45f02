package h3conn

import (
	"sync"
	"time"
)

// Dead-path detection. A QUIC connection whose network path stops
// delivering (UDP dropped by a middlebox, a NAT binding lost, the server's
// socket gone) says nothing: no CONNECTION_CLOSE arrives, and quic-go keeps
// the connection until its idle timeout (30 s by default), while every
// request given to it waits. A path that works acknowledges every
// ack-eliciting packet within a round trip plus the peer's ACK delay; when
// the client's packets go unanswered while quic-go keeps sending probes
// (RFC 9002 section 6.2: a probe timeout, PTO, doubling each time), the path
// is dead. Chromium's QUIC reasons the same way: its path is "degrading"
// after 4 consecutive PTOs without an acknowledgement, and a connection
// whose packets stay unacknowledged for longer is closed as a network
// blackhole.
//
// quic-go v0.65 does not expose its PTO count or the acknowledgement state
// of its packets except through its qlog tracer, which builds an event (and
// allocates) for every packet; what it exposes cheaply is
// quic.Conn.ConnectionStats: packets sent and received, and the RTT
// estimate (atomic loads, no allocation). The watch samples those while the
// connection is in use and infers the rest:
//
//   - the client sends no packet without a reason except one ACK for what it
//     received last; so two or more packets sent since a packet last
//     arrived mean something ack-eliciting is waiting for its answer (a
//     request's frames, a RESET_STREAM or STOP_SENDING of a cancelled one,
//     a keep-alive PING, or quic-go's own probes). That starts a "run";
//   - any packet arriving ends the run: the path works;
//   - the path is dead when a run lasted deadPTOs consecutive probe timeouts
//     (PTO·(2^deadPTOs − 1), the PTO from the connection's own RTT estimate
//     and the default 25 ms ACK delay: 15 PTOs, 4 s at a 200 ms RTT), and at
//     least deadMinDuration, and quic-go sent at least deadMinProbes packets
//     during it (it was running and probing, not suspended with the
//     process).
//
// A server that takes long to answer on a working path is not dead: its
// QUIC stack acknowledges the request at once, and the keep-alive PINGs
// (DefaultKeepAlivePeriod: 10 s after the last packet received) are
// acknowledged too, ending every run.
//
// The watch runs on a timer of the connection's, armed when a request
// starts on an unwatched connection (a bool under Conn.mu on the request
// path: no allocation, no system call) and left to stop by itself once the
// connection is idle and quiet for two looks. What it cannot see: a path
// that died while the connection was idle, until the next request sends
// something (that request then waits for the judgement); and a path that
// died while the requests only wait for their answers, until the keep-alive
// PING goes out (about 11 s in all with the default period; quic-go has no
// call to send a PING sooner). Without keep-alives (a QUICConfig with
// KeepAlivePeriod 0) the second case is left to the idle timeout.
const (
	// deadPTOs is how many consecutive probe timeouts a run must last.
	deadPTOs = 4
	// deadMinDuration is the least a run lasts before the path is judged
	// dead, however short the RTT: on loopback or a LAN 4 PTOs are about
	// half a second, less than a stalled peer process (or a test machine
	// under load) may pause for. It also keeps the judgement within what
	// a request with a deadline of a few seconds can afford: the requests
	// waiting on the connection are retried over TCP after it.
	deadMinDuration = time.Second
	// deadMinProbes is how many packets the client must have sent during a
	// run: quic-go sends two probes at each PTO.
	deadMinProbes = 2
	// peerAckDelay is the peer's max_ack_delay assumed in the PTO (RFC 9000's
	// default; quic-go does not report the peer's value).
	peerAckDelay = 25 * time.Millisecond
	// watchMinInterval and watchMaxInterval bound the time between two looks.
	watchMinInterval = 50 * time.Millisecond
	watchMaxInterval = time.Second
)

// pathSample is what one look at the connection's counters saw.
type pathSample struct {
	sent, received uint64 // packets, since the connection began
}

// pathVerdict is the outcome of one look.
type pathVerdict uint8

const (
	// pathQuiet: nothing was sent or received since the previous look and
	// nothing waits for an answer.
	pathQuiet pathVerdict = iota
	// pathActive: packets moved and nothing waits for an answer for long.
	pathActive
	// pathWaiting: packets sent since the last arrival wait for an answer.
	pathWaiting
	// pathDead: they waited for too long.
	pathDead
)

// pathWatch is the state of the dead-path judgement between two looks.
type pathWatch struct {
	mu sync.Mutex // guards the fields below (one look at a time)
	// looked is set after the first look, which only takes the counters.
	looked bool
	last   pathSample // the previous look's counters
	// base is the count of packets sent at the look that last saw a packet
	// arrive: packets sent beyond it are not answered yet.
	base uint64
	// runSince is when a run (unanswered packets) was first seen; zero
	// when there is none. runSent is the count of packets sent then.
	runSince time.Time
	runSent  uint64
}

// deadAfter is how long a run lasts before the path is judged dead, for a
// connection whose RTT estimate is srtt with mean deviation rttvar.
func deadAfter(srtt, rttvar time.Duration) time.Duration {
	if srtt <= 0 {
		srtt = 100 * time.Millisecond // RFC 9002's initial RTT, before a sample
	}
	pto := srtt + max(4*rttvar, time.Millisecond) + peerAckDelay
	return max(pto*(1<<deadPTOs-1), deadMinDuration)
}

// watchInterval is the time between two looks for a given deadAfter: a
// run is seen to last long enough at most an eighth of it late.
func watchInterval(deadAfter time.Duration) time.Duration {
	return min(max(deadAfter/8, watchMinInterval), watchMaxInterval)
}

// restart begins a watch from the counters s: the connection was not
// watched (idle and quiet), so nothing sent before waits for an answer.
func (w *pathWatch) restart(s pathSample) {
	w.mu.Lock()
	w.looked = true
	w.last, w.base = s, s.sent
	w.runSince = time.Time{}
	w.mu.Unlock()
}

// look judges the path from the counters s taken at now.
func (w *pathWatch) look(s pathSample, now time.Time, deadAfter time.Duration) pathVerdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.looked {
		w.looked = true
		w.last, w.base = s, s.sent
		return pathActive
	}
	prev := w.last
	w.last = s
	if s.received != prev.received {
		// The peer answered: whatever was sent before this look may still
		// be unanswered, but the path works.
		w.base = s.sent
		w.runSince = time.Time{}
		return pathActive
	}
	if w.runSince.IsZero() {
		if s.sent < w.base+2 {
			// At most the ACK of what arrived last.
			if s.sent == prev.sent {
				return pathQuiet
			}
			return pathActive
		}
		w.runSince, w.runSent = now, s.sent
		return pathWaiting
	}
	if now.Sub(w.runSince) >= deadAfter && s.sent >= w.runSent+deadMinProbes {
		return pathDead
	}
	return pathWaiting
}
