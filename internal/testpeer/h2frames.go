package testpeer

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2Script says how an H2Server behaves on each connection it accepts.
type H2Script struct {
	// Settings are the server's SETTINGS, sent after the client preface.
	Settings []http2.Setting
	// BeforeSettings, when set, runs after the preface and before the
	// server's SETTINGS (a test holding them back until it is ready).
	BeforeSettings func()
	// SettingsAfterHeaders, when set, holds the server's SETTINGS back
	// until a request is at the server: it reads the frames of connection
	// conn up to its first HEADERS without answering any, calls
	// SettingsAfterHeaders (which may block: a request the server holds
	// while the client has not had its SETTINGS), then writes the
	// SETTINGS and handles the frames read so far as usual, that HEADERS
	// last. A connection that ends before its first HEADERS gets no
	// SETTINGS and no call.
	SettingsAfterHeaders func(conn int)
	// NoSettings: the server never sends its SETTINGS (it acknowledges
	// the client's and answers requests all the same).
	NoSettings bool
	// OnHeaders answers a request's HEADERS frame on connection conn (0,
	// 1, ... in accept order), the stream-th request of that connection.
	// An error ends the connection. Nil ignores requests.
	OnHeaders func(conn, stream int, fr *http2.Framer, streamID uint32) error
	// OnRequest, when set, answers each request with its header block
	// decoded, in place of OnHeaders: every header block of a connection
	// is read with one HPACK decoder (a 4096-byte table), as a server's
	// must be, so a client whose blocks refer to a table the server does
	// not have fails the decoding (the connection ends). An error ends
	// the connection.
	OnRequest func(conn int, fr *http2.Framer, f *http2.MetaHeadersFrame) error
	// NoPingAck: PING frames are never acknowledged (a server that answers
	// requests but not PINGs).
	NoPingAck bool
	// MutePingsAfterReset: once a connection has read an RST_STREAM, its
	// PING frames are no longer acknowledged (a client's reset then stays
	// unconfirmed).
	MutePingsAfterReset bool
	// OnReset, when set, is told of each RST_STREAM read on connection
	// conn, with its error code, after it was counted.
	OnReset func(conn int, streamID uint32, code http2.ErrCode)
	// OnData, when set, is given each DATA frame's payload read on
	// connection conn (valid only during the call) and whether it ends
	// the stream, with the connection's Framer to answer on; not those
	// read before SettingsAfterHeaders returns. An error ends the
	// connection.
	OnData func(conn int, fr *http2.Framer, streamID uint32, data []byte, endStream bool) error
}

// H2Server is an in-process cleartext HTTP/2 server written with x/net's
// Framer, for the frames real servers rarely send on demand (REFUSED_STREAM,
// GOAWAY naming an earlier stream, SETTINGS late or allowing no stream). It
// acknowledges SETTINGS and PING frames (unless the script mutes PINGs) and
// hands HEADERS to the script; everything else is read and ignored.
type H2Server struct {
	ln     net.Listener
	script H2Script
	wg     sync.WaitGroup

	conns connSet

	mu      sync.Mutex // guards streams, pings and resets
	streams int
	pings   int // PING frames read (not acks)
	resets  int // RST_STREAM frames read
}

// StartH2 starts an H2Server on a loopback port; the test's cleanup closes
// it and every connection and waits for its goroutines. A test whose
// BeforeSettings or SettingsAfterHeaders blocks must unblock it in a
// cleanup registered after StartH2 (cleanups run last-registered first).
func StartH2(t testing.TB, script H2Script) *H2Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &H2Server{ln: ln, script: script}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

// PingsAndResets reports the PING frames (acks not counted) and the
// RST_STREAM frames the server read, over all connections.
func (s *H2Server) PingsAndResets() (pings, resets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings, s.resets
}

// Addr is the server's "127.0.0.1:port".
func (s *H2Server) Addr() string { return s.ln.Addr().String() }

// Counts reports the connections accepted and the request HEADERS seen.
func (s *H2Server) Counts() (conns, streams int) {
	_, conns = s.conns.counts()
	s.mu.Lock()
	defer s.mu.Unlock()
	return conns, s.streams
}

func (s *H2Server) accept() { serveEach(s.ln, &s.wg, &s.conns, s.serve) }

func (s *H2Server) serve(n int, c net.Conn) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	if s.script.BeforeSettings != nil {
		s.script.BeforeSettings()
	}
	fr := http2.NewFramer(c, c)
	if s.script.OnRequest != nil {
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	}
	var early []http2.Frame // read before the SETTINGS were written
	if s.script.SettingsAfterHeaders != nil {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			// Kept past the next ReadFrame: the Framer does not reuse
			// frames, and handle reads none of the payloads that do
			// share its buffer (only headers, PING data, error codes).
			early = append(early, f)
			if isRequestHead(f) {
				break
			}
		}
		s.script.SettingsAfterHeaders(n)
	}
	if !s.script.NoSettings && fr.WriteSettings(s.script.Settings...) != nil {
		return
	}
	h := h2Handler{s: s, n: n, fr: fr, mutePings: s.script.NoPingAck}
	for _, f := range early {
		if _, ok := f.(*http2.DataFrame); ok {
			continue // its payload was overwritten by later reads
		}
		if h.handle(f) != nil {
			return
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil || h.handle(f) != nil {
			return
		}
	}
}

// h2Handler is the state of one H2Server connection's frame handling.
type h2Handler struct {
	s         *H2Server
	n         int // the connection's place in accept order
	fr        *http2.Framer
	k         int  // requests handed to OnHeaders so far
	mutePings bool // PINGs are no longer acknowledged
}

// handle answers frame f; an error ends the connection.
func (h *h2Handler) handle(f http2.Frame) error {
	s := h.s
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return h.fr.WriteSettingsAck()
		}
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		s.mu.Lock()
		s.pings++
		s.mu.Unlock()
		if !h.mutePings {
			return h.fr.WritePing(true, f.Data)
		}
	case *http2.RSTStreamFrame:
		s.mu.Lock()
		s.resets++
		s.mu.Unlock()
		if s.script.MutePingsAfterReset {
			h.mutePings = true
		}
		if s.script.OnReset != nil {
			s.script.OnReset(h.n, f.StreamID, f.ErrCode)
		}
	case *http2.DataFrame:
		if s.script.OnData != nil {
			return s.script.OnData(h.n, h.fr, f.StreamID, f.Data(), f.StreamEnded())
		}
	case *http2.MetaHeadersFrame:
		s.mu.Lock()
		s.streams++
		s.mu.Unlock()
		return s.script.OnRequest(h.n, h.fr, f)
	case *http2.HeadersFrame:
		s.mu.Lock()
		s.streams++
		s.mu.Unlock()
		if s.script.OnHeaders != nil {
			if err := s.script.OnHeaders(h.n, h.k, h.fr, f.StreamID); err != nil {
				return err
			}
		}
		h.k++
	}
	return nil
}

// isRequestHead reports a request's HEADERS, decoded (OnRequest) or not.
func isRequestHead(f http2.Frame) bool {
	switch f.(type) {
	case *http2.HeadersFrame, *http2.MetaHeadersFrame:
		return true
	}
	return false
}

func (s *H2Server) close() {
	s.ln.Close()
	s.conns.closeAll()
	s.wg.Wait()
}

// H2OK answers stream streamID with status 200 and the body "ok".
func H2OK(fr *http2.Framer, streamID uint32) error {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: streamID, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return fr.WriteData(streamID, true, []byte("ok"))
}
