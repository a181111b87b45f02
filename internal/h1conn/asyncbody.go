package h1conn

import (
	"net/http"
	"time"
)

// A request body that may stream (not known to be small and in memory) is
// written by one goroutine for that request only, while the caller reads
// the response head: the server may answer before it has read the whole
// body (an early 413, a bidirectional stream). ResponseHeaderTimeout starts
// when the body is fully written, as in net/http.

// exchangeAsync starts the body writer and reads the response.
func (pc *Conn) exchangeAsync(o *Outgoing, hs *headState) (*http.Response, error) {
	pc.startAsyncWrite(o)
	resp, err := pc.readResponse(o, hs)
	if err == nil {
		return resp, nil
	}
	// The response failed: stop the writer and prefer its own failure
	// (the caller's body error or a broken connection) when it came first.
	pc.abortMu.Lock()
	werr := pc.asyncWriteErr
	pc.bodyStopped = true
	pc.abortMu.Unlock()
	pc.interruptIO()
	pc.closeReqBodyNow(o.Body)
	<-pc.writeRes
	pc.writing = false
	if werr != nil {
		return nil, writeFailure(werr)
	}
	return nil, err
}

// startAsyncWrite runs the body write on its own goroutine. The head is
// already in pc.bw; the writer flushes it with the body.
func (pc *Conn) startAsyncWrite(o *Outgoing) {
	if pc.writeRes == nil {
		pc.writeRes = make(chan error, 1)
	}
	// The writer's own copy of o: RoundTrip changes o for a retry. The
	// connection keeps it for its next writer, which starts only once
	// this one has reported (finish and exchangeAsync wait for writeRes;
	// a connection whose writer was abandoned is closed).
	oc := pc.asyncOut
	if oc == nil {
		oc = new(Outgoing)
		pc.asyncOut = oc
	}
	*oc = *o
	pc.abortMu.Lock()
	gen := pc.gen
	pc.headPending = true
	pc.asyncWriteErr = nil
	pc.bodyStopped = false
	pc.abortMu.Unlock()
	pc.writing = true
	pc.asyncBody = o.Body
	if hook := pc.cfg.BodyWriter; hook != nil {
		hook(pc)
	}
	go pc.writeBodyAsync(oc, gen)
}

func (pc *Conn) writeBodyAsync(o *Outgoing, gen uint64) {
	var callerSide bool
	var err error
	if !isKnownInMemory(o.Body) {
		// The body may yield its pieces only as the server answers the
		// earlier ones: the head goes out now and each piece as it comes,
		// as net/http sends them.
		o.streamBody = true
		if err = pc.bw.Flush(); err != nil {
			pc.CloseReqBody(o.Body)
		}
	}
	if err == nil {
		callerSide, err = pc.writeRequestBodySide(o)
	}
	if err == nil {
		err = pc.bw.Flush()
	}
	wroteRequest(o, err)
	pc.abortMu.Lock()
	if err != nil {
		pc.asyncWriteErr = err
		if callerSide && gen == pc.gen && pc.abortErr == nil && !pc.bodyStopped {
			// The caller's body failed: that error ends the request (the
			// server may wait for the rest of the body forever). A failed
			// Read is returned as is; a failed Close or a wrong length
			// as net/http reports them, on a connection it closes. Not
			// when the exchange had already failed and closed the body
			// under the writer (bodyStopped): that Read error is ours.
			if bre, ok := err.(requestBodyReadError); ok {
				pc.abortErr = bre.err
			} else {
				pc.abortErr = &connBrokenError{err}
			}
			pc.conn.SetDeadline(aLongTimeAgo)
		}
	} else if d := pc.cfg.ResponseHeaderTimeout; d > 0 && pc.headPending && gen == pc.gen {
		pc.conn.SetReadDeadline(time.Now().Add(d))
		pc.writerDL = true
	}
	pc.abortMu.Unlock()
	*o = Outgoing{} // the idle connection keeps no reference to the request
	pc.writeRes <- err
}

// endHeadWait marks the head as read, clearing a header deadline the writer
// may have set.
func (pc *Conn) endHeadWait() {
	pc.abortMu.Lock()
	pc.headPending = false
	if pc.writerDL {
		pc.writerDL = false
		if pc.abortErr == nil {
			pc.conn.SetReadDeadline(time.Time{})
		}
	}
	pc.abortMu.Unlock()
}

// writerDeadlineSet reports whether the writer armed the header timeout.
func (pc *Conn) writerDeadlineSet() bool {
	pc.abortMu.Lock()
	defer pc.abortMu.Unlock()
	return pc.writerDL
}
