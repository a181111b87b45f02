package h2conn

// Flow control of the own connection (RFC 9113 section 5.2).
//
// Receiving: the peer may send as many DATA bytes (padding included) as
// the windows this side advertised, for the connection and for each
// stream; more is a FLOW_CONTROL_ERROR for the connection (read.go). Bytes
// are given back as the caller reads them (padding and the bytes of gone
// streams at once), in WINDOW_UPDATEs sent only once a quarter of the
// window is owed, so a response smaller than that costs none and a large
// one a few per window.
//
// Sending: DATA waits for both send windows, which the peer's
// WINDOW_UPDATEs and SETTINGS_INITIAL_WINDOW_SIZE grow (read.go wakes the
// writers through c.wake).

// refreshDue reports whether owed bytes of a window are worth a
// WINDOW_UPDATE now.
func refreshDue(owed, window int32) bool {
	return owed > 0 && owed >= max(window/4, 1)
}

// connConsumedLocked records n bytes of connection window the caller (or
// the discarding of a gone stream's data) used up; c.mu held. It returns
// the connection WINDOW_UPDATE increment now due, 0 for none.
func (c *clientConn) connConsumedLocked(n int32) uint32 {
	c.recvUnacked += n
	if !refreshDue(c.recvUnacked, c.connWindow) {
		return 0
	}
	inc := c.recvUnacked
	c.recvUnacked = 0
	c.recvAvail += inc
	return uint32(inc)
}

// consumedLocked records n body bytes the caller read from cs; c.mu held.
// It returns the connection and stream WINDOW_UPDATE increments now due.
// A stream the peer has ended needs no more window.
func (c *clientConn) consumedLocked(cs *stream, n int32) (connInc, streamInc uint32) {
	connInc = c.connConsumedLocked(n)
	if cs.recvEnded || cs.gone {
		return connInc, 0
	}
	cs.recvUnacked += n
	if refreshDue(cs.recvUnacked, c.streamWindow) {
		streamInc = uint32(cs.recvUnacked)
		cs.recvAvail += cs.recvUnacked
		cs.recvUnacked = 0
	}
	return connInc, streamInc
}

// takeSendWindow waits until cs may send some of want bytes of DATA and
// takes that much (at most one frame, sized by dataFrameLen) from both
// send windows. want 0 takes nothing and does not wait. It fails with the
// stream's error, or errStopBody once the body is not to be sent.
func (c *clientConn) takeSendWindow(cs *stream, want int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if cs.err != nil {
			return 0, cs.err
		}
		if cs.stopBody {
			return 0, errStopBody
		}
		if c.readErr != nil {
			return 0, errClientConnLost
		}
		if want == 0 {
			return 0, nil
		}
		n := min(int64(want), int64(cs.sendWindow), int64(c.sendWindow), int64(dataFrameLen(want, c.peerMaxFrame)))
		if n > 0 {
			cs.sendWindow -= int32(n)
			c.sendWindow -= int32(n)
			return int(n), nil
		}
		c.wake.Wait()
	}
}
