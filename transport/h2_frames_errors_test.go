package transport

import (
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// Frame-level HTTP/2 protocol errors a server can commit after the
// handshake, one request each (harness in h2_frames_test.go): malformed
// frames and header blocks, flow-control and SETTINGS violations,
// malformed responses, and a close inside a header block. Connection
// errors fail the request and the next request dials again; stream errors
// fail the request only and the connection serves on.

// h2FrameRaw is a frame header (length, type, flags, stream id) followed
// by payload, as bytes: for frames the Framer will not write.
func h2FrameRaw(length int, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) []byte {
	b := []byte{byte(length >> 16), byte(length >> 8), byte(length), byte(typ), byte(flags), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[5:], id)
	return append(b, payload...)
}

// TestH2FramesContinuationWithoutHeaders: a CONTINUATION frame that no
// HEADERS frame opened is a connection error (PROTOCOL_ERROR, RFC 9113
// 6.10).
func TestH2FramesContinuationWithoutHeaders(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := testpeer.HeaderBlock(":status", "200")
			p.Write(func(fr *http2.Framer) error { return fr.WriteContinuation(id, true, block) })
			return p.OK(id, "late") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesFrameInsideHeaderBlock: a header block must be contiguous;
// a DATA frame between a HEADERS frame without END_HEADERS and its
// CONTINUATION is a connection error (PROTOCOL_ERROR, RFC 9113 4.3).
func TestH2FramesFrameInsideHeaderBlock(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := testpeer.HeaderBlock(":status", "200", "x-a", "b")
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:1]})
			})
			p.Data(id, false, []byte("inside"))
			p.Write(func(fr *http2.Framer) error { return fr.WriteContinuation(id, true, block[1:]) })
			return false
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesWindowUpdateZeroOnStream: a WINDOW_UPDATE of 0 on a stream
// is a stream error (PROTOCOL_ERROR, RFC 9113 6.9): that request fails,
// the connection serves on.
func TestH2FramesWindowUpdateZeroOnStream(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, 0) })
			return true
		},
		want:  "PROTOCOL_ERROR",
		conns: 1,
	}.run(t)
}

// TestH2FramesWindowUpdateZeroOnConn: a WINDOW_UPDATE of 0 on the
// connection is a connection error (PROTOCOL_ERROR).
func TestH2FramesWindowUpdateZeroOnConn(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 0) })
			return p.OK(id, "late") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesSettingsInitialWindowTooLarge: SETTINGS_INITIAL_WINDOW_SIZE
// above 2^31-1 is a connection error (FLOW_CONTROL_ERROR, RFC 9113 6.5.2).
func TestH2FramesSettingsInitialWindowTooLarge(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
			})
			return p.OK(id, "late") == nil
		},
		want:  "FLOW_CONTROL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesSettingsWindowChangeOverflows: a stream's send window
// raised to 2^31-1 by WINDOW_UPDATE (allowed), then a SETTINGS raising
// the initial window by one, which takes that stream's window past
// 2^31-1: RFC 9113 6.9.2 makes it a connection error
// (FLOW_CONTROL_ERROR). net/http's client (and x/net's) does not check
// (the stream is a GET with nothing left to send) and takes the answer
// on the same connection. Either is accepted: net/http's outcome, or the
// RFC's (the request fails with FLOW_CONTROL_ERROR, the next one dials
// again).
func TestH2FramesSettingsWindowChangeOverflows(t *testing.T) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		s, peers := startH2FrameServer(t, nil, false, func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, 1<<31-1-65535) })
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536})
			})
			return p.OK(id, "late") == nil
		})
		u := "http://" + s.Addr() + "/"
		first := h2FrameGet(t, rt, u)
		conns := 1
		if !strings.Contains(first.String(), `200 "late"`) {
			first.check(t, "first request", "FLOW_CONTROL_ERROR")
			conns = 2
		}
		h2FrameGet(t, rt, u).check(t, "next request", `200 "ok"`)
		peers.checkConns(t, side, s, conns)
		t.Logf("%s: first: %v; client frames: %s", side, first, peers.counts())
	})
}

// TestH2FramesSettingsMaxFrameSizeOutOfRange: SETTINGS_MAX_FRAME_SIZE
// below 16,384 is a connection error (PROTOCOL_ERROR, RFC 9113 6.5.2).
func TestH2FramesSettingsMaxFrameSizeOutOfRange(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1000})
			})
			return p.OK(id, "late") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesSettingsAckWithPayload: a SETTINGS acknowledgement with a
// payload is a connection error (FRAME_SIZE_ERROR, RFC 9113 6.5).
func TestH2FramesSettingsAckWithPayload(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.WriteRaw(h2FrameRaw(6, http2.FrameSettings, http2.FlagSettingsAck, 0, make([]byte, 6)))
			return p.OK(id, "late") == nil
		},
		want:  "FRAME_SIZE_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesPingWrongLength: a PING of other than 8 bytes is a
// connection error (FRAME_SIZE_ERROR, RFC 9113 6.7).
func TestH2FramesPingWrongLength(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.WriteRaw(h2FrameRaw(4, http2.FramePing, 0, 0, []byte("ping")))
			return p.OK(id, "late") == nil
		},
		want:  "FRAME_SIZE_ERROR",
		conns: 2,
	}.run(t)
}

// TestH2FramesFrameLargerThanAdvertised: a DATA frame one byte longer
// than the SETTINGS_MAX_FRAME_SIZE the client advertised is a connection
// error (FRAME_SIZE_ERROR, RFC 9113 4.2), found from the frame header
// (the server sends only the header and a few bytes of the payload).
func TestH2FramesFrameLargerThanAdvertised(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			limit := uint32(16384)
			if v, ok := p.ClientSetting(http2.SettingMaxFrameSize); ok {
				limit = v
			}
			h2Headers200(p, id)
			p.WriteRaw(h2FrameRaw(int(limit)+1, http2.FrameData, 0, id, make([]byte, 16)))
			return false
		},
		want:  "error: ",
		conns: 2,
	}.run(t)
}

// TestH2FramesResponseWithoutStatus: a response header block without
// :status is malformed (RFC 9113 8.3.2): a stream error, the request
// fails, the connection serves on.
func TestH2FramesResponseWithoutStatus(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			return p.Headers(id, true, "content-type", "text/plain") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 1,
	}.run(t)
}

// TestH2FramesUppercaseHeaderName: a field name with an uppercase letter
// makes the response malformed (RFC 9113 8.2.1): a stream error.
func TestH2FramesUppercaseHeaderName(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			return p.Headers(id, true, ":status", "200", "X-Upper", "v") == nil
		},
		want:  "PROTOCOL_ERROR",
		conns: 1,
	}.run(t)
}

// TestH2FramesBodyLongerThanContentLength: DATA beyond the response's
// content-length makes it malformed (RFC 9113 8.1.1): the body read
// fails rather than returning the extra bytes.
func TestH2FramesBodyLongerThanContentLength(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Headers(id, false, ":status", "200", "content-length", "3")
			return p.Data(id, true, []byte("longer")) == nil
		},
		want:  "body error: ",
		conns: 1,
	}.run(t)
}

// TestH2FramesBodyShorterThanContentLength: END_STREAM before the
// content-length was reached: the body read fails (not a short body
// taken as complete).
func TestH2FramesBodyShorterThanContentLength(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.Headers(id, false, ":status", "200", "content-length", "10")
			return p.Data(id, true, []byte("short")) == nil
		},
		want:  "body error: ",
		conns: 1,
	}.run(t)
}

// TestH2FramesDataAfterEndStream: DATA on a stream the server already
// ended. RFC 9113 5.1 makes it a STREAM_CLOSED error; net/http's client
// (and x/net's) drops it, taking it for a stream it cancelled, and the
// connection serves on. Pinned as net/http does it: the caller's body is
// the one before END_STREAM.
func TestH2FramesDataAfterEndStream(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			p.OK(id, "done")
			return p.Data(id, false, []byte("late")) == nil
		},
		want:  `200 "done"`,
		conns: 1,
	}.run(t)
}

// TestH2FramesServerClosesMidHeaderBlock: the connection ends after a
// HEADERS frame without END_HEADERS: the request fails, no hang.
func TestH2FramesServerClosesMidHeaderBlock(t *testing.T) {
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := testpeer.HeaderBlock(":status", "200", "x-a", strings.Repeat("b", 100))
			p.Write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:10]})
			})
			h2FrameHalfClose(p, nil)
			return false
		},
		want:  "error: ",
		conns: 2,
	}.run(t)
}

// TestH2FramesServerClosesMidSettings: the server's first SETTINGS frame
// is cut after half its payload and the connection ends: the request
// fails with an error, no hang, and the next one dials again.
func TestH2FramesServerClosesMidSettings(t *testing.T) {
	h2FrameRun(t, nil, func(t *testing.T, side string, rt http.RoundTripper) {
		s := testpeer.StartH2Hostile(t, testpeer.H2HostileScript{
			NoSettings: true,
			Serve: func(p *testpeer.H2Peer) {
				// One setting is 6 bytes; the header announces two.
				h2FrameHalfClose(p, h2FrameRaw(12, http2.FrameSettings, 0, 0, make([]byte, 6)))
				<-p.Closed()
			},
		})
		for i := 0; i < 2; i++ {
			o := h2FrameGet(t, rt, "http://"+s.Addr()+"/")
			o.check(t, "request", "error: ")
		}
		if n := s.Conns(); n < 2 {
			t.Errorf("%d connections for two requests, want a new one after the cut", n)
		}
	})
}

// TestH2FramesHeaderBlockInManyFragments: a valid response header block
// cut into 2-byte pieces, a HEADERS frame and hundreds of CONTINUATION
// frames: a legal (if odd) encoding every client must accept; a cap on
// CONTINUATION frames must not refuse it.
func TestH2FramesHeaderBlockInManyFragments(t *testing.T) {
	var fragments int
	h2FrameViolation{
		act: func(p *testpeer.H2Peer, id uint32) bool {
			block := testpeer.HeaderBlock(":status", "200", "x-long", strings.Repeat("v", 1000))
			fragments = (len(block) + 1) / 2
			p.Write(func(fr *http2.Framer) error {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:2]}); err != nil {
					return err
				}
				for rest := block[2:]; len(rest) > 0; rest = rest[min(2, len(rest)):] {
					if err := fr.WriteContinuation(id, len(rest) <= 2, rest[:min(2, len(rest))]); err != nil {
						return err
					}
				}
				return nil
			})
			return p.Data(id, true, []byte("fragmented")) == nil
		},
		want:  `200 "fragmented"`,
		conns: 1,
		check: func(t *testing.T, side string, o h2FrameOutcome, peers *h2FramePeers) {
			t.Logf("%s: header block in %d frames", side, fragments)
		},
	}.run(t)
}
