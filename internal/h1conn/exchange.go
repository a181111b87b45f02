package h1conn

import (
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"time"

	"github.com/ferryhttp/ferry/internal/gzipbody"
)

// One request/response exchange on an Conn, on the caller's goroutine.
// Only a request body that is not known to be small and in memory is
// written by a goroutine of its own (exchangeAsync), so that a server may
// answer before reading it all.

// responseAndBody puts the Response, its body reader and the backing array
// of its first head's first header values in one allocation. Four values
// keep it in the 288-byte size class (224 without them), so the bytes equal
// those of the separate values slice they replace.
type responseAndBody struct {
	resp http.Response
	body Body
	vals [4]string
}

// headState is the bookkeeping of reading response heads for one request.
type headState struct {
	budget    int64 // header bytes still allowed
	firstByte bool  // GotFirstResponseByte has fired
	heads     int   // response heads read so far (1xx included)
	// spare backs the header values of the next head parsed (the
	// response's own allocation); it is used by one head only, so a 1xx
	// header handed to Got1xxResponse is never overwritten.
	spare []string
	keys  framingKeys // framing keys present in the last head parsed
}

// RoundTrip runs o's exchange on pc. On error the connection is closed and
// its slot released; the error is classified for the retry decision.
func (pc *Conn) RoundTrip(o *Outgoing) (*http.Response, error) {
	start := pc.nwrite
	resp, err := pc.exchange(o)
	if err == nil {
		return resp, nil
	}
	err = pc.classify(err, start)
	pc.closeAfter = true
	pc.finish(false)
	return nil, err
}

func (pc *Conn) exchange(o *Outgoing) (*http.Response, error) {
	start := pc.nwrite
	if o.probe && o.Chunked {
		o.probeUnknownLength()
	}
	if err := writeRequestHead(pc.bw, o); err != nil {
		return nil, err
	}
	pc.boundInline(o, start)
	hs := headState{budget: pc.cfg.MaxHeaderBytes}
	switch {
	case o.Body == nil && !o.ExpectContinue:
		err := pc.bw.Flush()
		wroteRequest(o, err)
		if err != nil {
			return nil, &connBrokenError{err}
		}
		pc.armHeaderTimeout()
		return pc.readResponse(o, &hs)
	case o.ExpectContinue:
		return pc.exchangeContinue(o, &hs)
	case o.SyncBody:
		err := pc.writeRequestBody(o)
		if err == nil {
			err = pc.bw.Flush()
		}
		wroteRequest(o, err)
		if err != nil {
			return nil, writeFailure(err)
		}
		pc.armHeaderTimeout()
		return pc.readResponse(o, &hs)
	}
	return pc.exchangeAsync(o, &hs)
}

func wroteRequest(o *Outgoing, err error) {
	if o.Trace != nil && o.Trace.WroteRequest != nil {
		if bre, ok := err.(requestBodyReadError); ok {
			err = bre.err
		}
		o.Trace.WroteRequest(httptraceWroteRequestInfo(err))
	}
}

// armHeaderTimeout starts ResponseHeaderTimeout: the request is written.
func (pc *Conn) armHeaderTimeout() {
	if d := pc.cfg.ResponseHeaderTimeout; d > 0 {
		pc.conn.SetReadDeadline(time.Now().Add(d))
		pc.readDL = true
	}
}

func (pc *Conn) clearReadDeadline() {
	if pc.readDL {
		pc.conn.SetReadDeadline(time.Time{})
		pc.readDL = false
	}
}

// awaitFirstByte blocks until the response starts and fires
// GotFirstResponseByte once.
func (pc *Conn) awaitFirstByte(o *Outgoing, hs *headState) error {
	if _, err := pc.br.Peek(1); err != nil {
		return pc.headReadError(cutAfterInformational(err, hs), !hs.firstByte)
	}
	if !hs.firstByte {
		hs.firstByte = true
		if o.Trace != nil && o.Trace.GotFirstResponseByte != nil {
			o.Trace.GotFirstResponseByte()
		}
	}
	return nil
}

// cutAfterInformational turns the io.EOF of a connection that ended after
// a 1xx head into io.ErrUnexpectedEOF: the final response was cut short,
// as net/http reports it (its status line read meets the end).
func cutAfterInformational(err error, hs *headState) error {
	if err == io.EOF && hs.heads > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readOneHead reads and parses the next response head into resp.
func (pc *Conn) readOneHead(resp *http.Response, hs *headState) error {
	head, err := readHead(pc.br, hs.budget)
	if err != nil {
		if _, ok := err.(headerLimitError); ok {
			// The budget left after 1xx heads ran out: the error names
			// the configured limit, as net/http's does.
			err = headerLimitError(pc.cfg.MaxHeaderBytes)
		}
		return pc.headReadError(err, false)
	}
	hs.budget -= int64(len(head))
	hs.heads++
	spare := hs.spare
	hs.spare = nil
	hs.keys, err = pc.parseHead(head, resp, spare)
	return err
}

// readResponse reads heads until a final one, skipping 1xx responses
// (reported to Got1xxResponse), and builds the response.
func (pc *Conn) readResponse(o *Outgoing, hs *headState) (*http.Response, error) {
	rb := new(responseAndBody)
	resp := &rb.resp
	hs.spare = rb.vals[:]
	for {
		if err := pc.awaitFirstByte(o, hs); err != nil {
			return nil, err
		}
		if err := pc.readOneHead(resp, hs); err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusRequestTimeout && pc.reused && hs.heads == 1 && IsReplayable(o.Req) {
			// A 408 first thing on a reused connection is what a server
			// sends on an idle connection before closing it; net/http's
			// reader drops such a connection while it is idle, so the
			// request goes elsewhere: retried here, as only a replayable
			// request can be. (One that cannot be replayed was sent only
			// after FitForReuse read the socket, which finds such a 408
			// waiting, so a 408 it gets is the server's answer to it; a
			// replayable one is checked so after quietCheckIdle, or at
			// once when bytes may be left behind the previous response.)
			return nil, readFromServerError{errServerClosedIdle}
		}
		if !isInformational(resp.StatusCode) {
			break
		}
		if err := pc.got1xx(o, resp, hs); err != nil {
			return nil, err
		}
		*resp = http.Response{}
	}
	pc.clearReadDeadline()
	if pc.writing {
		pc.endHeadWait()
	}
	return pc.finishResponse(o, rb, hs.keys)
}

// isInformational reports a non-final 1xx (101 is final).
func isInformational(code int) bool {
	return code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols
}

func (pc *Conn) got1xx(o *Outgoing, resp *http.Response, hs *headState) error {
	// net/http reads a 1xx head as any response: malformed framing fields
	// are an error, and the header the hook sees is cleaned up the same way.
	if _, _, err := responseFraming(resp, o.Method, hs.keys); err != nil {
		return err
	}
	if o.Trace != nil && o.Trace.Got1xxResponse != nil {
		if err := o.Trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
			return err
		}
		// The caller sees every 1xx and limits them; the budget restarts.
		hs.budget = pc.cfg.MaxHeaderBytes
	}
	return nil
}

// finishResponse sets framing, body, TLS and Request on a final response
// whose header holds the framing keys in keys.
func (pc *Conn) finishResponse(o *Outgoing, rb *responseAndBody, keys framingKeys) (*http.Response, error) {
	resp := &rb.resp
	resp.Request = o.Req
	resp.TLS = pc.tlsState
	// Framing first, as net/http reads every head: a protocol switch with
	// malformed framing fields is an error too.
	kind, length, err := responseFraming(resp, o.Method, keys)
	if err != nil {
		return nil, err
	}
	if isProtocolSwitch(resp) {
		// The connection now belongs to the caller: it leaves the pool and
		// cancellation no longer applies; Body.Close frees its slot.
		pc.detach()
		resp.Body = &upgradeBody{pc: pc}
		return resp, nil
	}
	// Go 1.27 never reuses the connection of a CONNECT request: only a 2xx
	// makes it a tunnel, but net/http drops it after any status. A final
	// status below 200 (a 101 that switches nothing, or one below 100) is
	// unexpected: net/http does not reuse its connection either.
	if resp.Close || o.Req.Close || o.AddClose || resp.StatusCode <= 199 || (netHTTP127 && o.Method == "CONNECT") {
		pc.closeAfter = true
	}
	if kind == bodyNone {
		resp.Body = http.NoBody
		pc.finish(true)
		return resp, nil
	}
	b := &rb.body
	b.init(pc, kind, length, &resp.Trailer)
	resp.Body = b
	if o.AddGzip {
		if ce, _ := keys.lookup(resp.Header, hasContentEncoding); len(ce) > 0 && strings.EqualFold(ce[0], "gzip") {
			resp.Body = gzipbody.New(b)
			b.bigLength = false // resp.ContentLength is -1 now (drain.go)
			delete(resp.Header, "Content-Encoding")
			delete(resp.Header, "Content-Length")
			resp.ContentLength = -1
			resp.Uncompressed = true
		}
	}
	return resp, nil
}

// detach disarms cancellation for a connection handed to the caller.
func (pc *Conn) detach() {
	pc.disarmCancel()
	pc.abortMu.Lock()
	pc.gen++
	pc.abortMu.Unlock()
	pc.clearReadDeadline()
}

// parseHead parses one response head into resp, sizing the header map
// from this connection's moving average of header counts; spare, when not
// nil, backs the first header values.
func (pc *Conn) parseHead(head string, resp *http.Response, spare []string) (framingKeys, error) {
	line, rest := nextLine(head)
	if err := parseStatusLine(line, resp); err != nil {
		return 0, err
	}
	h, n, keys, err := parseHeaderFieldsInto(rest, (pc.hdrEstimate+15)/16, spare)
	if err != nil {
		return 0, err
	}
	resp.Header = h
	pc.learnHeaderCount(n)
	return keys, nil
}

// learnHeaderCount updates the moving average (weight 1/4 for the newest
// count, fixed point x16) and publishes it to the transport when it moved by
// a whole header, so new connections start warm without every response
// writing a shared cache line.
func (pc *Conn) learnHeaderCount(n int) {
	pc.hdrEstimate += (n*16 - pc.hdrEstimate) / 4
	if shared := int(pc.cfg.HeaderEstimate.Load()); shared-pc.hdrEstimate >= 16 || pc.hdrEstimate-shared >= 16 {
		pc.cfg.HeaderEstimate.Store(int32(pc.hdrEstimate))
	}
}

// headReadError maps an error reading a response head. beforeAny means no
// byte of the response had arrived.
func (pc *Conn) headReadError(err error, beforeAny bool) error {
	if aerr := pc.Aborted(); aerr != nil {
		return aerr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && (pc.readDL || pc.writerDeadlineSet()) {
		return ErrHeaderTimeout
	}
	if beforeAny {
		return readFromServerError{err}
	}
	return err
}

// classify turns the error of a failed exchange into the one RoundTrip
// returns and retries on: the abort reason first, then the caller's body
// error, then "nothing written" for a failure before any byte went out.
func (pc *Conn) classify(err error, start int64) error {
	if aerr := pc.Aborted(); aerr != nil {
		return aerr
	}
	var bre requestBodyReadError
	if errors.As(err, &bre) {
		return bre.err
	}
	if err == ErrHeaderTimeout {
		return err
	}
	if pc.nwrite == start {
		if cb, ok := err.(*connBrokenError); ok {
			err = cb.err
		}
		return nothingWrittenError{err}
	}
	switch err.(type) {
	case readFromServerError, *connBrokenError:
		return err
	}
	// net/http reports a bad response as a broken connection.
	return &connBrokenError{err}
}
