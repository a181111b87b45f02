package h2conn

import (
	"context"
	"errors"
	"time"

	"golang.org/x/net/http2"
)

// The own connection's request slots (the package contract's ReserveStream,
// ReleaseStream, Usable, IdleSince, CloseIfIdle, Close, Shutdown and the
// SETTINGS waits). The peer's stream limit is read from its SETTINGS, so a
// slot counts against the streams really open: reserved slots plus the
// streams in c.streams. Before the first SETTINGS a second slot is granted
// provisionally (its RoundTrip waits for them and then checks the limit)
// unless an OnStreamFree hook is set, in which case it is refused and the
// hook is called when they arrive.

// reserve is ReserveStream.
func (c *clientConn) reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reserveLocked()
}

// reserveLocked takes a slot if the connection may open another stream;
// c.mu held.
func (c *clientConn) reserveLocked() bool {
	if !c.usableLocked() || (c.singleUse && c.rounds+c.reserved > 0) {
		return false
	}
	others := c.reserved + len(c.streams)
	if !c.settled && others > 0 && c.free.Load() != nil {
		return false // AwaitPeerSettings waits for them
	}
	if !c.strict && c.settled && !c.roomLocked(c.reserved) {
		return false
	}
	c.reserved++
	c.busy++
	return true
}

// unreserve is ReleaseStream.
func (c *clientConn) unreserve() {
	c.mu.Lock()
	if c.reserved == 0 {
		c.mu.Unlock()
		return
	}
	c.reserved--
	c.mu.Unlock()
	c.releaseSlot()
	c.notifyFree()
}

// releaseSlot gives back one slot in use, and closes a dead connection
// that has nothing left in flight.
func (c *clientConn) releaseSlot() {
	c.mu.Lock()
	c.busy--
	if c.busy == 0 && len(c.streams) == 0 {
		c.idleSince = c.now()
	}
	closeNow := c.closeIfDoneLocked()
	dead := c.dead
	c.mu.Unlock()
	if closeNow {
		c.nc.Close()
	}
	if dead {
		// Waiters for a stream look again: this connection will take
		// none, and its closing may have freed a connection slot.
		c.notifyFree()
	}
}

// usable is Usable.
func (c *clientConn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usableLocked() && !(c.singleUse && c.rounds > 0)
}

// idle is IdleSince.
func (c *clientConn) idle() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idleSince, c.busy == 0 && len(c.streams) == 0
}

// closeIfIdle is CloseIfIdle.
func (c *clientConn) closeIfIdle() bool {
	c.mu.Lock()
	if c.busy > 0 || len(c.streams) > 0 {
		c.mu.Unlock()
		return false
	}
	c.mu.Unlock()
	c.closeWith(errClientConnClosed)
	return true
}

// close is Close.
func (c *clientConn) close() {
	c.closeWith(errClientConnForceClosed)
	c.notifyFree()
}

// shutdown is Shutdown: GOAWAY, then wait for the streams in flight.
func (c *clientConn) shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.setDeadLocked()
	last := c.lastOpened
	c.mu.Unlock()
	c.notifyFree()
	c.wmu.Lock()
	c.fr.WriteGoAway(last, 0, nil)
	c.flushLocked()
	c.wmu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.wake.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	for len(c.streams) > 0 && c.readErr == nil && ctx.Err() == nil {
		c.wake.Wait()
	}
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	c.closeWith(errClientConnClosed)
	return nil
}

// awaitSettings is AwaitPeerSettings.
func (c *clientConn) awaitPeer(ctx context.Context) (bool, error) {
	if !c.settingsPending() {
		return false, nil
	}
	select {
	case <-c.settledc:
	case <-c.diedc:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	return true, nil
}

// settingsPending is PeerSettingsPending.
func (c *clientConn) settingsPending() bool {
	if c.free.Load() == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.settled && !c.dead
}

// A stream this side resets before the server ended it still counts
// against the server's limit until the server has read the RST_STREAM,
// and a server that reads nothing may be dead. So, as net/http does, the
// reset goes out with a PING and the stream keeps counting
// (c.unackedResets) until the PING is acknowledged. The stream leaves
// c.streams before its RST_STREAM is written (outside c.mu), so without
// the count another request could take its place and get its HEADERS to
// the server first, over the server's limit (Go's server resets such a
// stream with PROTOCOL_ERROR). A server that never acknowledges is given
// up after PingTimeout, so a connection full of unconfirmed resets does
// not hold requests for good.

// countResetLocked counts cs's reset as unconfirmed if the server had not
// ended the stream; c.mu held. It reports whether it did.
func (c *clientConn) countResetLocked(cs *stream) bool {
	if cs.recvEnded || c.dead {
		return false
	}
	c.unackedResets++
	return true
}

// sendCancel resets stream id with CANCEL; confirm sends a PING with it
// and waits (on a goroutine of its own) for the ack that confirms the
// reset.
func (c *clientConn) sendCancel(id uint32, confirm bool) {
	if !confirm {
		c.writeReset(id, http2.ErrCodeCancel)
		return
	}
	go c.confirmReset(id)
}

// confirmReset writes the RST_STREAM and its PING, and stops counting the
// stream when the ack arrives (or gives up on the connection when it does
// not within pingTimeout).
func (c *clientConn) confirmReset(id uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), c.pingTimeout)
	defer cancel()
	err := c.pingWith(ctx, func() { c.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
	c.mu.Lock()
	c.unackedResets--
	c.wake.Broadcast()
	c.mu.Unlock()
	if errors.Is(err, context.DeadlineExceeded) {
		c.closeWith(errPingTimeout)
	}
	c.notifyFree()
}
