package h1conn

import (
	"errors"
	"net/http"
	"os"
	"time"

	"golang.org/x/net/http/httpguts"
)

// "Expect: 100-continue": the head goes out alone; the body follows a 100
// Continue, or ExpectContinueTimeout without any answer. An empty body
// (http.NoBody) waits the same way, as in net/http. A final answer
// instead of 100 means the body is not sent when the connection will close
// (and is sent otherwise, to keep the connection's framing in step).

func (pc *Conn) exchangeContinue(o *Outgoing, hs *headState) (*http.Response, error) {
	err := pc.bw.Flush()
	if err != nil {
		wroteRequest(o, err)
		return nil, &connBrokenError{err}
	}
	if o.Trace != nil && o.Trace.Wait100Continue != nil {
		o.Trace.Wait100Continue()
	}
	d := pc.cfg.ExpectContinueTimeout
	if d <= 0 {
		return pc.sendBodyThenRead(o, hs)
	}
	deadline := time.Now().Add(d)
	rb := new(responseAndBody)
	resp := &rb.resp
	for {
		pc.conn.SetReadDeadline(deadline)
		pc.readDL = true
		_, err := pc.br.Peek(1)
		pc.clearReadDeadline()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && pc.Aborted() == nil {
				// No answer in time: send the body anyway.
				return pc.sendBodyThenRead(o, hs)
			}
			wroteRequest(o, err)
			return nil, pc.headReadError(cutAfterInformational(err, hs), !hs.firstByte)
		}
		if err := pc.awaitFirstByte(o, hs); err != nil {
			return nil, err
		}
		if err := pc.readOneHead(resp, hs); err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusContinue {
			if o.Trace != nil && o.Trace.Got100Continue != nil {
				o.Trace.Got100Continue()
			}
			if err := pc.got1xx(o, resp, hs); err != nil {
				return nil, err
			}
			return pc.sendBodyThenRead(o, hs)
		}
		if isInformational(resp.StatusCode) {
			if err := pc.got1xx(o, resp, hs); err != nil {
				return nil, err
			}
			*resp = http.Response{}
			continue
		}
		break
	}
	// A final status without 100 Continue: skip the body if the connection
	// will close, send it otherwise (before the connection can be reused).
	if o.Req.Close || o.AddClose || responseWillClose(resp) {
		pc.CloseReqBody(o.Body)
		wroteRequest(o, nil)
		pc.closeAfter = true
	} else if err := pc.sendBody(o); err != nil {
		pc.closeAfter = true
	}
	final, err := pc.finishResponse(o, rb, hs.keys)
	if err != nil {
		return nil, err
	}
	return final, nil
}

// responseWillClose reports, without changing resp, whether the connection
// closes after it (shouldCloseResponse's rule).
func responseWillClose(resp *http.Response) bool {
	if resp.ProtoMajor < 1 {
		return true
	}
	conv := resp.Header["Connection"]
	hasClose := httpguts.HeaderValuesContainsToken(conv, "close")
	if resp.ProtoMajor == 1 && resp.ProtoMinor == 0 {
		return hasClose || !httpguts.HeaderValuesContainsToken(conv, "keep-alive")
	}
	return hasClose
}

// sendBodyThenRead writes the body and reads the final response.
func (pc *Conn) sendBodyThenRead(o *Outgoing, hs *headState) (*http.Response, error) {
	if !o.SyncBody {
		return pc.exchangeAsync(o, hs)
	}
	if err := pc.sendBody(o); err != nil {
		return nil, writeFailure(err)
	}
	pc.armHeaderTimeout()
	return pc.readResponse(o, hs)
}

// sendBody writes the body inline (or, for a streaming body, starts the
// writer) and reports WroteRequest.
func (pc *Conn) sendBody(o *Outgoing) error {
	if o.Body == nil {
		// http.NoBody: the head, already flushed, was the whole request
		// (net/http waits for the 100 all the same), unless the caller
		// asked for chunked framing: then the empty body's last chunk
		// follows the 100, as net/http writes it.
		var err error
		if o.EmptyChunked {
			if err = writeLastChunk(pc.bw, o.Req.Trailer); err == nil {
				err = pc.bw.Flush()
			}
		}
		wroteRequest(o, err)
		return err
	}
	if !o.SyncBody {
		pc.startAsyncWrite(o)
		return nil
	}
	err := pc.writeRequestBody(o)
	if err == nil {
		err = pc.bw.Flush()
	}
	wroteRequest(o, err)
	return err
}
