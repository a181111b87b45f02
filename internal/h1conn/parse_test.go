package h1conn

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzResponse feeds arbitrary bytes to the response parser and body
// readers as a connection would: it must return a response or an error,
// never panic or loop. Seeds live in testdata/fuzz/FuzzResponse.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n3;e\r\nabc\r\n0\r\nX: 1\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody",
		"HTTP/1.1 103 Early\r\nLink: a\r\n\r\nHTTP/1.1 204 No\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n",
		"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\nPragma: no-cache\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pc := &Conn{cfg: testConfig(), conn: nopConn{}}
		pc.br = bufio.NewReaderSize(strings.NewReader(string(data)), 64)
		hs := headState{budget: 1 << 16}
		for i := 0; i < 10; i++ {
			var resp http.Response
			if err := pc.readOneHead(&resp, &hs); err != nil {
				return
			}
			if isInformational(resp.StatusCode) {
				continue
			}
			// Every lookup through the parser's key set finds what the
			// map holds, and framing (for a GET and a HEAD) decides
			// exactly what framing with every key looked up decides.
			for bit, name := range framingKeyNames {
				got, gotOK := hs.keys.lookup(resp.Header, 1<<bit)
				want, wantOK := resp.Header[name]
				if gotOK != wantOK || !equalHeader(http.Header{"K": got}, http.Header{"K": want}) {
					t.Fatalf("keys %08b: lookup of %s gives %q, the map %q", hs.keys, name, got, want)
				}
			}
			frame := func(r *http.Response, method string) (bodyKind, int64, error) {
				ref := *r
				ref.Header = r.Header.Clone()
				refKind, refN, refErr := responseFraming(&ref, method, anyFramingKey)
				kind, n, err := responseFraming(r, method, hs.keys)
				if kind != refKind || n != refN || (err == nil) != (refErr == nil) ||
					r.Close != ref.Close || r.ContentLength != ref.ContentLength ||
					!equalHeader(r.Header, ref.Header) || !equalHeader(r.Trailer, ref.Trailer) {
					t.Fatalf("%s framing with keys %08b: %v %d %v %+v; with every key: %v %d %v %+v",
						method, hs.keys, kind, n, err, *r, refKind, refN, refErr, ref)
				}
				return kind, n, err
			}
			head := resp
			head.Header = resp.Header.Clone()
			frame(&head, "HEAD")
			kind, n, err := frame(&resp, "GET")
			if err != nil {
				return
			}
			b := &Body{}
			b.init(pc, kind, n, &resp.Trailer)
			if kind == bodyNone {
				return
			}
			buf := make([]byte, 7)
			for j := 0; j < 1<<16; j++ {
				if _, err := b.readFraming(buf); err != nil {
					return
				}
			}
			t.Fatal("body reader did not end")
		}
	})
}

// TestFramingKeys: the parser reports a framing key exactly when the header
// it returns holds that key, whatever case the key arrived in
// (FuzzResponse checks that framing decides the same with the report as
// with every key looked up).
func TestFramingKeys(t *testing.T) {
	tests := []struct {
		in   string
		want framingKeys
	}{
		{in: "Content-Type: x\r\nServer: s\r\n\r\n", want: 0},
		{in: "Content-Length: 3\r\n\r\n", want: hasContentLength},
		{in: "content-length: 3\r\nCONNECTION: close\r\n\r\n", want: hasContentLength | hasConnection},
		{in: "Transfer-Encoding: chunked\r\nTrailer: X\r\n\r\n", want: hasTransferEncoding | hasTrailer},
		{in: "pragma: no-cache\r\ncontent-encoding: gzip\r\n\r\n", want: hasPragma | hasContentEncoding},
		// A space before the colon keeps the key as it is: not the key.
		{in: "Content-Length : 3\r\n\r\n", want: 0},
		// Same lengths as framing keys, other names.
		{in: "Content-Lengtx: 3\r\nAlt-Svc: h3=\":1\"\r\nX-Pragma: a\r\n\r\n", want: 0},
	}
	for _, tt := range tests {
		h, _, keys, err := parseHeaderFieldsInto(tt.in, 0, nil)
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if keys != tt.want {
			t.Errorf("%q: keys %08b, want %08b", tt.in, keys, tt.want)
		}
		for bit, name := range framingKeyNames {
			_, inMap := h[name]
			if inMap != (keys&(1<<bit) != 0) {
				t.Errorf("%q: %s in header %v, in keys %v", tt.in, name, inMap, keys&(1<<bit) != 0)
			}
		}
	}
}

// nopConn stands in for a connection in parser-only tests.
type nopConn struct{ netConnStub }

func TestParseHeaderFields(t *testing.T) {
	tests := []struct {
		in      string
		want    http.Header
		wantErr bool
	}{
		{in: "A: 1\r\nb-c: 2\r\nA: 3\r\n\r\n", want: http.Header{"A": {"1", "3"}, "B-C": {"2"}}},
		{in: "content-type:  x  \r\n\r\n", want: http.Header{"Content-Type": {"x"}}},
		{in: "X-F: a\r\n  b\r\n\tc\r\n\r\n", want: http.Header{"X-F": {"a b c"}}},
		{in: "Bad Key: v\r\n\r\n", want: http.Header{"Bad Key": {"v"}}},
		{in: "NoColon\r\n\r\n", wantErr: true},
		{in: ": empty\r\n\r\n", wantErr: true},
		{in: " lead: x\r\n\r\n", wantErr: true},
		{in: "K: a\x00b\r\n\r\n", wantErr: true},
		{in: "K\x7f: a\r\n\r\n", wantErr: true},
	}
	for _, tt := range tests {
		for _, hint := range []int{0, 1, 32} {
			h, _, err := parseHeaderFields(tt.in, hint)
			if (err != nil) != tt.wantErr {
				t.Fatalf("%q hint %d: err %v", tt.in, hint, err)
			}
			if err == nil && !equalHeader(h, tt.want) {
				t.Fatalf("%q hint %d: got %v want %v", tt.in, hint, h, tt.want)
			}
		}
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w := b[k]
		if strings.Join(v, "\x00") != strings.Join(w, "\x00") || len(v) != len(w) {
			return false
		}
	}
	return true
}

// TestCommonKeysInterned: a common key in another case folds to the
// interned constant without allocating.
func TestCommonKeysInterned(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if foldKey("content-type") != "Content-Type" {
			t.Fatal("fold")
		}
	})
	if allocs != 0 {
		t.Fatalf("foldKey allocated %v times", allocs)
	}
}

// TestHeaderEstimateLearns: the moving average follows the header counts
// a connection sees.
func TestHeaderEstimateLearns(t *testing.T) {
	pc := &Conn{cfg: testConfig()}
	for i := 0; i < 30; i++ {
		pc.learnHeaderCount(24)
	}
	if got := (pc.hdrEstimate + 15) / 16; got < 23 || got > 24 {
		t.Fatalf("estimate after 30x24 headers = %d", got)
	}
	for i := 0; i < 30; i++ {
		pc.learnHeaderCount(4)
	}
	if got := (pc.hdrEstimate + 15) / 16; got < 4 || got > 5 {
		t.Fatalf("estimate after 30x4 headers = %d", got)
	}
	_ = io.EOF
}
