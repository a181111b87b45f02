package h2conn

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawServer is a cleartext HTTP/2 server written with x/net's Framer that
// answers each request HEADERS with onHeaders, to produce the frames a real
// server rarely sends on demand (REFUSED_STREAM, GOAWAY naming an earlier
// stream).
type rawServer struct {
	ln        net.Listener
	onHeaders func(fr *http2.Framer, streamID uint32) error
	wg        sync.WaitGroup
	mu        sync.Mutex // guards conns
	conns     []net.Conn
}

func startRawServer(t testing.TB, onHeaders func(fr *http2.Framer, streamID uint32) error) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, onHeaders: onHeaders}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *rawServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if fr.WriteSettingsAck() != nil {
					return
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if fr.WritePing(true, f.Data) != nil {
					return
				}
			}
		case *http2.HeadersFrame:
			if s.onHeaders(fr, f.StreamID) != nil {
				return
			}
		}
	}
}

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// writeOK answers a stream with 200 and a short body.
func writeOK(fr *http2.Framer, streamID uint32) error {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: streamID, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return fr.WriteData(streamID, true, []byte("ok"))
}

type http2Framer = http2.Framer

const (
	http2ErrCodeRefusedStream = http2.ErrCodeRefusedStream
	http2ErrCodeNo            = http2.ErrCodeNo
)
