package testpeer

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2HostileScript says how an H2Hostile server behaves on each connection.
type H2HostileScript struct {
	// Settings are the server's SETTINGS, sent after the client's preface
	// and SETTINGS, unless NoSettings.
	Settings []http2.Setting
	// NoSettings: the server never sends its SETTINGS (it still reads and
	// acknowledges the client's).
	NoSettings bool
	// Serve owns connection p once the handshake is done. The server
	// closes the connection when Serve returns; a script that must keep
	// it open waits on p.Closed().
	Serve func(p *H2Peer)
}

// H2Hostile is an in-process cleartext HTTP/2 server for frame-level
// tests: after the preface and SETTINGS exchange each connection is
// handed to a script that writes whatever frames or bytes it likes (a
// protocol violation, a flood, a frame cut in half), while a reader
// goroutine acknowledges the client's SETTINGS and PINGs, counts every
// frame the client sends, and hands request HEADERS to the script.
type H2Hostile struct {
	ln     net.Listener
	script H2HostileScript
	wg     sync.WaitGroup

	conns connSet
}

// H2Peer is the server's side of one connection of an H2Hostile server.
type H2Peer struct {
	// Conn is the raw connection (for bytes that are not whole frames).
	// Writes go through WriteRaw, which orders them with frame writes.
	Conn net.Conn
	// N numbers the connection in accept order, from 0.
	N int

	fr      *http2.Framer
	writes  chan h2Write  // to the writer goroutine, the only one writing on fr and Conn
	wdone   chan struct{} // closed when the writer ends
	stop    chan struct{} // closed when the server is done with the connection
	streams chan uint32
	closed  chan struct{} // closed when the reader ends (EOF, error, server close)

	mu       sync.Mutex // guards counts, settings and granted
	counts   map[string]int
	settings map[http2.SettingID]uint32
	granted  map[uint32]int64 // the client's WINDOW_UPDATE increments, summed by stream (0: the connection)
}

// StartH2Hostile starts an H2Hostile server on a loopback port; the test's
// cleanup closes every connection and waits for the server's goroutines.
func StartH2Hostile(t testing.TB, script H2HostileScript) *H2Hostile {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &H2Hostile{ln: ln, script: script}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Addr is the server's "127.0.0.1:port".
func (s *H2Hostile) Addr() string { return s.ln.Addr().String() }

// Conns reports the connections accepted so far.
func (s *H2Hostile) Conns() int {
	_, accepted := s.conns.counts()
	return accepted
}

// Close stops the server, closes its connections and waits for its
// goroutines. It is safe to call more than once.
func (s *H2Hostile) Close() {
	s.ln.Close()
	s.conns.closeAll()
	s.wg.Wait()
}

func (s *H2Hostile) accept() { serveEach(s.ln, &s.wg, &s.conns, s.serve) }

func (s *H2Hostile) serve(n int, c net.Conn) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	p := &H2Peer{
		Conn:     c,
		N:        n,
		fr:       http2.NewFramer(c, c),
		writes:   make(chan h2Write),
		wdone:    make(chan struct{}),
		stop:     make(chan struct{}),
		streams:  make(chan uint32, 1024),
		closed:   make(chan struct{}),
		counts:   map[string]int{},
		settings: map[http2.SettingID]uint32{},
		granted:  map[uint32]int64{},
	}
	// A hostile server writes what a correct Framer refuses to (DATA on
	// stream 0, HEADERS on an even stream).
	p.fr.AllowIllegalWrites = true
	// The client's SETTINGS follow its preface; reading them first lets a
	// script know the windows and limits the client advertised.
	f, err := p.fr.ReadFrame()
	if err != nil {
		return
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return
	}
	sf.ForeachSetting(func(st http2.Setting) error {
		p.settings[st.ID] = st.Val
		return nil
	})
	if !s.script.NoSettings {
		if p.fr.WriteSettings(s.script.Settings...) != nil {
			return
		}
	}
	if p.fr.WriteSettingsAck() != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.read()
	}()
	go p.writer()
	if s.script.Serve != nil {
		s.script.Serve(p)
	}
	c.Close()
	close(p.stop)
	<-done
	<-p.wdone
}

// h2Write is one write for the writer goroutine: w on the Framer, or raw
// bytes when w is nil; its result goes to res (buffered).
type h2Write struct {
	w   func(fr *http2.Framer) error
	raw []byte
	res chan error
}

// writer performs every write on the connection, in the order asked, so
// that the script's frames and the reader's acknowledgements never
// interleave inside a frame. It ends at the first failed write or when
// the server is done with the connection.
func (p *H2Peer) writer() {
	defer close(p.wdone)
	for {
		select {
		case wr := <-p.writes:
			var err error
			if wr.w != nil {
				err = wr.w(p.fr)
			} else {
				_, err = p.Conn.Write(wr.raw)
			}
			wr.res <- err
			if err != nil {
				return
			}
		case <-p.stop:
			return
		}
	}
}

// read reads the client's frames until the connection ends.
func (p *H2Peer) read() {
	defer close(p.closed)
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			return
		}
		// Counted before it is acted on: a script answering a request
		// already sees its HEADERS counted.
		p.mu.Lock()
		p.counts[frameName(f)]++
		if wu, ok := f.(*http2.WindowUpdateFrame); ok {
			p.granted[wu.StreamID] += int64(wu.Increment)
		}
		p.mu.Unlock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && p.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() }) != nil {
				return
			}
		case *http2.PingFrame:
			if !f.IsAck() && p.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) }) != nil {
				return
			}
		case *http2.HeadersFrame:
			select {
			case p.streams <- f.StreamID:
			default: // a script that stopped taking requests: count only
			}
		}
	}
}

// frameName names f as Count does.
func frameName(f http2.Frame) string {
	name := f.Header().Type.String()
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			name += "+ACK"
		}
	case *http2.PingFrame:
		if f.IsAck() {
			name += "+ACK"
		}
	case *http2.RSTStreamFrame:
		name += " " + f.ErrCode.String()
	case *http2.GoAwayFrame:
		name += " " + f.ErrCode.String()
	}
	return name
}

func (p *H2Peer) write(w func(fr *http2.Framer) error) error {
	return p.do(h2Write{w: w})
}

func (p *H2Peer) do(wr h2Write) error {
	wr.res = make(chan error, 1)
	select {
	case p.writes <- wr:
		return <-wr.res
	case <-p.wdone:
		return net.ErrClosed
	}
}

// Write runs w with the connection's Framer, ordered with every other
// write on the connection (the reader's acknowledgements included).
func (p *H2Peer) Write(w func(fr *http2.Framer) error) error { return p.write(w) }

// WriteRaw writes b to the connection as is.
func (p *H2Peer) WriteRaw(b []byte) error {
	return p.do(h2Write{raw: b})
}

// NextStream waits up to timeout for the next request HEADERS and returns
// its stream id; ok is false if the connection ended or the time ran out.
func (p *H2Peer) NextStream(timeout time.Duration) (id uint32, ok bool) {
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	select {
	case id := <-p.streams:
		return id, true
	case <-p.closed:
		select {
		case id := <-p.streams:
			return id, true
		default:
			return 0, false
		}
	case <-tm.C:
		return 0, false
	}
}

// NextStreams waits for the next n request HEADERS, each up to timeout,
// and returns their stream ids in arrival order; ok is false if the
// connection ended or a stream did not come in time.
func (p *H2Peer) NextStreams(n int, timeout time.Duration) (ids []uint32, ok bool) {
	for len(ids) < n {
		id, ok := p.NextStream(timeout)
		if !ok {
			return ids, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// Closed is closed once the client closed the connection (or it failed).
func (p *H2Peer) Closed() <-chan struct{} { return p.closed }

// Count reports how many frames named name the client sent: the frame
// type ("PING", "HEADERS"), "+ACK" appended for acknowledgements, the
// error code appended for RST_STREAM and GOAWAY ("GOAWAY PROTOCOL_ERROR").
func (p *H2Peer) Count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[name]
}

// Counts returns a copy of every frame count (see Count).
func (p *H2Peer) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		m[k] = v
	}
	return m
}

// WaitCount waits up to timeout until Count(name) reaches n.
func (p *H2Peer) WaitCount(name string, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.Count(name) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// ConnWindow reports the connection receive window the client granted so
// far: the initial 65,535 bytes plus every WINDOW_UPDATE increment it
// sent on stream 0 (the DATA the server sent is not taken off).
func (p *H2Peer) ConnWindow() int64 {
	return 65535 + p.WindowUpdates(0)
}

// WindowUpdates reports the sum of the WINDOW_UPDATE increments the
// client sent so far on stream id (0: the connection).
func (p *H2Peer) WindowUpdates(id uint32) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.granted[id]
}

// ClientSetting reports the value the client's first SETTINGS frame gave
// setting id, if it gave one.
func (p *H2Peer) ClientSetting(id http2.SettingID) (uint32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.settings[id]
	return v, ok
}

// HeaderBlock encodes name, value pairs with a fresh hpack encoder (no
// dynamic table state, so a block is valid on any connection).
func HeaderBlock(kv ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(kv); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return buf.Bytes()
}

// Headers writes one HEADERS frame (END_HEADERS set) carrying kv on
// stream id, with END_STREAM when end.
func (p *H2Peer) Headers(id uint32, end bool, kv ...string) error {
	return p.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: HeaderBlock(kv...), EndHeaders: true, EndStream: end})
	})
}

// Data writes one DATA frame on stream id.
func (p *H2Peer) Data(id uint32, end bool, b []byte) error {
	return p.write(func(fr *http2.Framer) error { return fr.WriteData(id, end, b) })
}

// OK answers stream id with status 200 and the body body.
func (p *H2Peer) OK(id uint32, body string) error {
	if err := p.Headers(id, false, ":status", "200"); err != nil {
		return err
	}
	return p.Data(id, true, []byte(body))
}
