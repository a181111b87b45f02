package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// writeCountingConn counts the Write calls made on a connection.
type writeCountingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCountingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestChunkedInMemoryBodyWrites: a request body known to be in memory and
// sent chunked (the caller asked for Transfer-Encoding: chunked) goes out
// in as few writes as net/http makes, which hands the whole rest of the
// reader to its chunked writer at once; a 1 MiB body written chunk by
// chunk, flushed each time, took about 24 times net/http's writes.
func TestChunkedInMemoryBodyWrites(t *testing.T) {
	const size = 1 << 20
	srv := startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil || n != size || len(r.TransferEncoding) == 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
		}
	}, false, nil)
	bodies := map[string]func() io.Reader{
		"strings.Reader": func() io.Reader { return strings.NewReader(strings.Repeat("x", size)) },
		"bytes.Reader":   func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("x"), size)) },
		"bytes.Buffer":   func() io.Reader { return bytes.NewBuffer(bytes.Repeat([]byte("x"), size)) },
	}
	for kind, body := range bodies {
		t.Run(kind, func(t *testing.T) { chunkedBodyWrites(t, srv.URL, size, body) })
	}
}

func chunkedBodyWrites(t *testing.T, url string, size int, body func() io.Reader) {
	var writes [2]int32
	for i, impl := range []string{"nethttp", "ferry"} {
		var n atomic.Int32
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writeCountingConn{c, &n}, nil
		}
		var rt http.RoundTripper = &http.Transport{DialContext: dial}
		if impl == "ferry" {
			rt = &Transport{DialContext: dial}
		}
		req, _ := http.NewRequest("POST", url+"/", body())
		req.TransferEncoding = []string{"chunked"}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", impl, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		closeIdle(rt)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: the server did not get the whole chunked body", impl, resp.StatusCode)
		}
		writes[i] = n.Load()
	}
	if writes[1] > writes[0] {
		t.Fatalf("writes for a 1 MiB chunked in-memory body: ferry %d, net/http %d", writes[1], writes[0])
	}
}
