package h2conn

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestRequestHeadersFollowServerTableSizeChanges sends requests, most of
// their fields repeated, while the server shrinks its header table to
// nothing and lets it grow again (SETTINGS_HEADER_TABLE_SIZE): a server
// decoding every block with one decoder, as RFC 7541 has it, must read
// each request's fields as they were sent. A field written as an index
// into the table as it was before a change fails the decoding (a
// connection error) or reads as another field.
func TestRequestHeadersFollowServerTableSizeChanges(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	// The table size the server sets after its k-th request.
	resize := map[int]uint32{3: 0, 6: 4096, 9: 64}
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		serveEchoHeaders(nc, resize)
	}()

	c, err := NewClientConn(dialH2(t, ln.Addr().String(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 12 {
		req := newRequest(t, "GET", fmt.Sprintf("http://%s/p%d", ln.Addr(), i%2), nil)
		req.Header.Set("X-Same", "same-value")
		req.Header.Set("X-N", fmt.Sprint(i))
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body := readAll(t, resp)
		want := fmt.Sprintf("/p%d same-value %d", i%2, i)
		if body != want {
			t.Fatalf("request %d: the server read %q, want %q", i, body, want)
		}
	}
}

// serveEchoHeaders is a cleartext HTTP/2 server on nc answering each
// request with its decoded ":path", "x-same" and "x-n", and changing its
// SETTINGS_HEADER_TABLE_SIZE after the requests resize names.
func serveEchoHeaders(nc net.Conn, resize map[int]uint32) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, preface); err != nil {
		return
	}
	fr := http2.NewFramer(nc, nc)
	dec := hpack.NewDecoder(4096, nil)
	fr.ReadMetaHeaders = dec
	if fr.WriteSettings() != nil {
		return
	}
	var respBlock bytes.Buffer
	enc := hpack.NewEncoder(&respBlock)
	for k := 1; ; {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.MetaHeadersFrame:
			body := fmt.Sprintf("%s %s %s", f.PseudoValue("path"), valueOf(f, "x-same"), valueOf(f, "x-n"))
			respBlock.Reset()
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: respBlock.Bytes(), EndHeaders: true}) != nil ||
				fr.WriteData(f.StreamID, true, []byte(body)) != nil {
				return
			}
			if size, ok := resize[k]; ok {
				if fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: size}) != nil {
					return
				}
			}
			k++
		}
	}
}

// valueOf is the value of f's regular field name ("" if none).
func valueOf(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}
