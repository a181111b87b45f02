package h2conn

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestRequestHeadersFollowServerTableSizeChanges sends requests, most of
// their fields repeated, while the server shrinks its header table to
// nothing and lets it grow again (SETTINGS_HEADER_TABLE_SIZE): a server
// decoding every block with one decoder, as RFC 7541 has it, must read
// each request's fields as they were sent. A field written as an index
// into the table as it was before a change fails the decoding (a
// connection error) or reads as another field.
func TestRequestHeadersFollowServerTableSizeChanges(t *testing.T) {
	// The table size the server sets after its k-th request.
	resize := map[int]uint32{3: 0, 6: 4096, 9: 64}
	srv := testpeer.StartH2(t, testpeer.H2Script{OnRequest: echoHeaders(resize)})
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 12 {
		req := newRequest(t, "GET", fmt.Sprintf("http://%s/p%d", srv.Addr(), i%2), nil)
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

// echoHeaders answers each request (of one connection) with its decoded
// ":path", "x-same" and "x-n", and changes the server's
// SETTINGS_HEADER_TABLE_SIZE after the k-th request to resize[k].
func echoHeaders(resize map[int]uint32) func(int, *http2.Framer, *http2.MetaHeadersFrame) error {
	var respBlock bytes.Buffer
	enc := hpack.NewEncoder(&respBlock)
	k := 0
	return func(_ int, fr *http2.Framer, f *http2.MetaHeadersFrame) error {
		k++
		body := fmt.Sprintf("%s %s %s", f.PseudoValue("path"), valueOf(f, "x-same"), valueOf(f, "x-n"))
		respBlock.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: respBlock.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		if err := fr.WriteData(f.StreamID, true, []byte(body)); err != nil {
			return err
		}
		if size, ok := resize[k]; ok {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: size})
		}
		return nil
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
