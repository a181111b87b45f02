package transport

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"
	"golang.org/x/net/http2"
)

// The HTTP/2 rows of BenchmarkRoundTrip: one GET on a shared TLS HTTP/2
// connection to a net/http server in a child process (this test binary
// re-executed with benchH2ServerEnv set), serial and from 64 goroutines,
// for ferry and net/http in the same run, and for x/net's own
// http2.Transport ("xnet"): the HTTP/2 code ferry uses, without ferry, so
// the run shows what ferry adds and what x/net costs against net/http's
// bundled copy. The response has the h1 bench's shape: benchBodyLen bytes
// and a few header fields.

const benchH2ServerEnv = "FERRY_BENCH_H2_SERVER"

// The large rows: a GET of benchH2GetLargePath answers benchH2LargeLen
// bytes; a POST of benchH2LargeLen bytes to benchH2PostLargePath is
// answered with the length the server read (and 400 unless it is
// exactly benchH2LargeLen). Both are larger than HTTP/2's default
// initial window (65,535 bytes), so flow control takes part.
const (
	benchH2LargeLen      = 64 << 10
	benchH2GetLargePath  = "/get64k"
	benchH2PostLargePath = "/post64k"
)

// The small upload row: a POST of benchH2SmallLen bytes to
// benchH2PostSmallPath, made as http.NewRequest makes one from a
// bytes.Reader (GetBody set), is answered like the large one.
const (
	benchH2SmallLen      = 1 << 10
	benchH2PostSmallPath = "/post1k"
)

func init() {
	// The child never returns to the test framework: it serves until its
	// parent closes stdin.
	if os.Getenv(benchH2ServerEnv) != "" {
		runBenchH2Server()
		os.Exit(0)
	}
}

func runBenchH2Server() {
	body := []byte(strings.Repeat("x", benchBodyLen))
	large := []byte(strings.Repeat("y", benchH2LargeLen))
	benchchild.ServeHTTP2(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"text/plain"}
		h["X-Bench-Header-2"] = []string{"value-2"}
		h["X-Bench-Header-3"] = []string{"value-3"}
		switch r.URL.Path {
		case benchH2GetLargePath:
			w.Write(large)
		case benchH2PostLargePath, benchH2PostSmallPath:
			// The upload's length is the answer; anything but exactly
			// the row's length is a 400 the client reports.
			want := int64(benchH2LargeLen)
			if r.URL.Path == benchH2PostSmallPath {
				want = benchH2SmallLen
			}
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil || n != want || r.ContentLength != want {
				w.WriteHeader(http.StatusBadRequest)
			}
			w.Write(strconv.AppendInt(nil, n, 10))
		default:
			w.Write(body)
		}
	}))
}

var benchH2 struct {
	once sync.Once
	url  string
	err  error
}

func startBenchH2Server(b *testing.B) string {
	benchH2.once.Do(func() {
		addr, _, err := benchchild.Start(benchH2ServerEnv)
		benchH2.url, benchH2.err = "https://"+addr+"/bench", err
	})
	if benchH2.err != nil {
		b.Fatal(benchH2.err)
	}
	return benchH2.url
}

func benchH2Client(impl string) http.RoundTripper {
	cfg := &tls.Config{InsecureSkipVerify: true} // loopback child with a throwaway cert
	switch impl {
	case "ferry":
		return &Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	case "xnet":
		return &http2.Transport{TLSClientConfig: cfg}
	}
	return &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
}

// benchH2Get is benchGet plus a check that the request went over HTTP/2.
func benchH2Get(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte) {
	benchH2Check(b, rt, req, buf, benchBodyLen, "")
}

// benchH2GetLarge is benchH2Get of the benchH2LargeLen-byte response.
func benchH2GetLarge(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte) {
	benchH2Check(b, rt, req, buf, benchH2LargeLen, "")
}

// benchH2Upload is an upload's body: benchH2Payload, read once.
type benchH2Upload struct{ bytes.Reader }

func (*benchH2Upload) Close() error { return nil }

var benchH2Payload = bytes.Repeat([]byte("u"), benchH2LargeLen)

// benchH2PostLarge POSTs benchH2LargeLen bytes (a copy of the GET
// template req, so that no request a client may still hold changes) and
// checks the server read exactly that many. The copy and the body are
// two of the row's allocations, the same for every client.
func benchH2PostLarge(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte) {
	post := *req
	post.Method = "POST"
	post.ContentLength = benchH2LargeLen
	up := &benchH2Upload{}
	up.Reset(benchH2Payload)
	post.Body = up
	benchH2Check(b, rt, &post, buf, len(benchH2LargeLenText), benchH2LargeLenText)
}

var benchH2LargeLenText = strconv.Itoa(benchH2LargeLen)

var (
	benchH2SmallPayload = bytes.Repeat([]byte("s"), benchH2SmallLen)
	benchH2SmallLenText = strconv.Itoa(benchH2SmallLen)
)

// benchH2PostSmall POSTs benchH2SmallLen bytes with a body as
// http.NewRequest makes it from a bytes.Reader (GetBody set: the body can
// be sent again) and checks the server read exactly that many. The
// request copy, the reader and its wrapper are the row's allocations,
// the same for every client.
func benchH2PostSmall(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte) {
	post := *req
	post.Method = "POST"
	post.ContentLength = benchH2SmallLen
	post.Body = io.NopCloser(bytes.NewReader(benchH2SmallPayload))
	post.GetBody = benchH2SmallGetBody
	benchH2Check(b, rt, &post, buf, len(benchH2SmallLenText), benchH2SmallLenText)
}

func benchH2SmallGetBody() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(benchH2SmallPayload)), nil
}

// benchH2Check sends req, checks the response is 200 over HTTP/2 with a
// body of wantLen bytes (equal to wantBody when that is not empty), and
// reads it whole into buf.
func benchH2Check(b *testing.B, rt http.RoundTripper, req *http.Request, buf []byte, wantLen int, wantBody string) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		b.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	n, rerr := readFull(resp, buf)
	if rerr != nil || n != wantLen || resp.StatusCode != 200 || (wantBody != "" && string(buf[:n]) != wantBody) {
		b.Fatalf("status %d, body %d bytes (%.16q), err %v", resp.StatusCode, n, buf[:n], rerr)
	}
}

// readFull reads the whole body into buf and closes it.
func readFull(resp *http.Response, buf []byte) (int, error) {
	defer resp.Body.Close()
	n := 0
	for {
		m, err := resp.Body.Read(buf[n:])
		n += m
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		if n == len(buf) {
			return n, fmt.Errorf("body longer than %d bytes", len(buf))
		}
	}
}

// benchRoundTripH2 adds impl's h2/serial and h2/parallel rows to
// BenchmarkRoundTrip, and those of the 64 KiB response (h2/get64k) and
// the 64 KiB upload (h2/post64k), and those of a 1 KiB upload made as
// http.NewRequest makes it (h2/post1k).
func benchRoundTripH2(b *testing.B, impl string) {
	url := startBenchH2Server(b)
	newRT := func() http.RoundTripper { return benchH2Client(impl) }
	benchServedGets(b, impl+"/h2", newRT, url, benchH2Get)
	base := strings.TrimSuffix(url, "/bench")
	benchServedRows(b, impl+"/h2/get64k", newRT, base+benchH2GetLargePath, benchH2LargeLen+1, benchH2GetLarge)
	benchServedRows(b, impl+"/h2/post64k", newRT, base+benchH2PostLargePath, 512, benchH2PostLarge)
	benchServedRows(b, impl+"/h2/post1k", newRT, base+benchH2PostSmallPath, 512, benchH2PostSmall)
}
