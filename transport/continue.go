package transport

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

func (pc *h1Conn) exchangeContinue(o *outgoing, hs *headState) (*http.Response, error) {
	err := pc.bw.Flush()
	if err != nil {
		wroteRequest(o, err)
		return nil, &connBrokenError{err}
	}
	if o.trace != nil && o.trace.Wait100Continue != nil {
		o.trace.Wait100Continue()
	}
	d := pc.t.ExpectContinueTimeout
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
			if errors.Is(err, os.ErrDeadlineExceeded) && pc.aborted() == nil {
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
			if o.trace != nil && o.trace.Got100Continue != nil {
				o.trace.Got100Continue()
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
	if o.req.Close || o.addClose || responseWillClose(resp) {
		pc.closeReqBody(o.body)
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
func (pc *h1Conn) sendBodyThenRead(o *outgoing, hs *headState) (*http.Response, error) {
	if !o.syncBody {
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
func (pc *h1Conn) sendBody(o *outgoing) error {
	if o.body == nil {
		// http.NoBody: the head, already flushed, was the whole request
		// (net/http waits for the 100 all the same), unless the caller
		// asked for chunked framing: then the empty body's last chunk
		// follows the 100, as net/http writes it.
		var err error
		if o.emptyChunked {
			if err = writeLastChunk(pc.bw, o.req.Trailer); err == nil {
				err = pc.bw.Flush()
			}
		}
		wroteRequest(o, err)
		return err
	}
	if !o.syncBody {
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
