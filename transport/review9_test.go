package transport

import (
	"bufio"
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Review of the session-9 parser and host rewrites: whole heads parsed by
// ferry are compared with net/http's http.ReadResponse on the same bytes,
// and Host headers sent by ferry with those net/http sends.

// review9Parse parses data as ferry does on a connection (bufio buffer of
// bufSize, so that both the one-pass scan and the line-by-line path for
// long heads are used), with spare values when spare > 0.
func review9Parse(data []byte, bufSize, spare int) (*http.Response, error) {
	pc := &h1Conn{t: &Transport{}, conn: nopConn{}}
	pc.br = bufio.NewReaderSize(bytes.NewReader(data), bufSize)
	hs := headState{budget: 1 << 20}
	if spare > 0 {
		hs.spare = make([]string, spare)
	}
	var resp http.Response
	if err := pc.readOneHead(&resp, &hs); err != nil {
		return nil, err
	}
	return &resp, nil
}

// review9Compare parses data with ferry and with http.ReadResponse and
// reports any difference in status, protocol, header or error text. data
// must not hold framing or connection keys (net/http's ReadResponse edits
// those in the header).
func review9Compare(t *testing.T, data []byte) {
	t.Helper()
	ref, refErr := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	for _, size := range []int{16, 4096} {
		for _, spare := range []int{0, 1, 8} {
			got, err := review9Parse(data, size, spare)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("buf %d spare %d: %q: ferry %v, net/http %v", size, spare, data, err, refErr)
			}
			if err != nil {
				// The quoted line aside: textproto quotes it with the key
				// folded and trailing blanks trimmed (ferry quotes it as
				// received; pre-existing, cosmetic).
				// And textproto reads at most 80 bytes of a first line
				// starting with a blank, failing with "message too large"
				// when it is longer (pre-existing, cosmetic).
				errText := func(e error) string { s, _, _ := strings.Cut(e.Error(), "\""); return s }
				initial := errText(err) == "malformed MIME header initial line: " && refErr.Error() == "message too large"
				if errText(err) != errText(refErr) && !initial {
					t.Fatalf("buf %d: %q: ferry error %q, net/http %q", size, data, err, refErr)
				}
				continue
			}
			if got.StatusCode != ref.StatusCode || got.Status != ref.Status || got.Proto != ref.Proto ||
				!equalHeader(got.Header, ref.Header) || len(got.Header) != len(ref.Header) {
				t.Fatalf("buf %d spare %d: %q:\nferry   %d %q %q %q\nnet/http %d %q %q %q", size, spare, data,
					got.StatusCode, got.Status, got.Proto, got.Header,
					ref.StatusCode, ref.Status, ref.Proto, ref.Header)
			}
		}
	}
	if refErr == nil {
		ref.Body.Close()
	}
}

// review9CollidingKeys returns pairs of different canonical keys that share
// a filter bit, found by search so that they stay colliding if
// keyFilterBit changes.
func review9CollidingKeys(n int) []string {
	var out []string
	seen := map[uint64]string{}
	for i := 0; len(out) < 2*n; i++ {
		k := "X-" + strconv.Itoa(i) + "z"
		bit := keyFilterBit(k)
		if prev, ok := seen[bit]; ok {
			out = append(out, prev, k)
			delete(seen, bit)
			continue
		}
		seen[bit] = k
	}
	return out
}

// TestReview9HeadDiff: heads made of keys that repeat, fold to a key seen
// before ("content-type" after "Content-Type"), share filter bits, carry a
// space before the colon, bytes above 127, obs-fold lines, bare LFs and
// invalid bytes parse exactly as net/http parses them.
func TestReview9HeadDiff(t *testing.T) {
	keys := []string{
		"Content-Type", "content-type", "CONTENT-TYPE", "Content-type", "Content-Type ",
		"content-type ", "Set-Cookie", "set-cookie", "X-A", "x-a", "X A", "x a", "A", "a",
		"Vary", "vary", "ETag", "Etag", "X-\x80", "\x80", "X_Y", "x_y", "Www-Authenticate",
		"www-authenticate", "-a", "a-", "X--y", "x--Y", "K\t", "Ké",
	}
	keys = append(keys, review9CollidingKeys(6)...)
	for _, k := range review9CollidingKeys(6) {
		keys = append(keys, strings.ToLower(k)) // folds onto a colliding key
	}
	values := []string{"", "v", " v ", "\tv\t", "a b", "\x80\xff", "é", "a\x01b", "a\x7fb", "x,y", " "}
	sep := []string{":", ": ", " : ", ":\t"}
	eol := []string{"\r\n", "\n", "\r\n", "\r\n"}
	rng := rand.New(rand.NewPCG(9, 9))
	for n := 0; n < 6000; n++ {
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK" + eol[rng.IntN(len(eol))])
		lines := rng.IntN(12)
		for i := 0; i < lines; i++ {
			if rng.IntN(60) == 0 {
				b.WriteString("no colon here")
			} else {
				b.WriteString(keys[rng.IntN(len(keys))] + sep[rng.IntN(len(sep))] + values[rng.IntN(len(values))])
			}
			b.WriteString(eol[rng.IntN(len(eol))])
			if rng.IntN(15) == 0 && (i > 0 || rng.IntN(4) == 0) {
				b.WriteString([]string{" ", "\t", "  "}[rng.IntN(3)] + "folded" + eol[rng.IntN(len(eol))])
			}
		}
		b.WriteString(eol[rng.IntN(len(eol))])
		b.WriteString("body")
		review9Compare(t, []byte(b.String()))
	}
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: a\r\ncontent-type: b\r\nCONTENT-TYPE: c\r\n\r\n",
		"HTTP/1.1 200 OK\r\ncontent-type: a\r\nContent-Type: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type : a\r\nContent-Type: b\r\nContent-Type : c\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: 1\r\n a: 2\r\na: 3\r\n\r\n",
		"HTTP/1.1 200 OK\n\n",
		"HTTP/1.1 200 OK\r\n\n",
		"HTTP/1.1 200 OK\r\nA: b\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\r\r\n\r\n",
		"HTTP/1.1 200 OK\r\n A: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA\x80: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: b\r\n\r\n",
	} {
		review9Compare(t, []byte(s))
	}
}

// FuzzReview9HeadDiff compares ferry's head parser with http.ReadResponse
// on arbitrary header lines after a fixed status line (framing and
// connection keys left out: ReadResponse edits them).
func FuzzReview9HeadDiff(f *testing.F) {
	for _, s := range []string{
		"Content-Type: a\r\ncontent-type: b\r\n\r\n",
		"A: 1\n a: 2\na: 3\n\n",
		"X A: 1\r\nX-A: 2\r\nx-a: 3\r\n\r\n",
		"K: \x80\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		low := strings.ToLower(s)
		for _, k := range []string{"content-length", "transfer-encoding", "connection", "trailer"} {
			if strings.Contains(low, k) {
				return
			}
		}
		data := []byte("HTTP/1.1 200 OK\r\n" + s)
		if findHeadEndByTwoSearches(data) < 0 {
			return // ferry reads a whole head first: a cut head is io.ErrUnexpectedEOF
		}
		review9Compare(t, data)
	})
}

// review9HostServer accepts connections on loopback and records, under the
// request's X-Review9 header, the request target of a CONNECT and the Host
// line as they came on the wire, before it answers.
type review9HostServer struct {
	ln net.Listener
	mu sync.Mutex // guards seen
	// seen: what each request carried, by its X-Review9 value
	seen map[string]string
}

func startReview9HostServer(t *testing.T) *review9HostServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &review9HostServer{ln: ln, seen: map[string]string{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				got, id := "", ""
				for first := true; ; first = false {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
					if first {
						if f := strings.Fields(line); len(f) == 3 && f[0] == "CONNECT" {
							got = "target " + f[1] + "; "
						}
						continue
					}
					k, v, _ := strings.Cut(line, ":")
					v = strings.TrimSuffix(strings.TrimPrefix(v, " "), "\r\n")
					switch {
					case strings.EqualFold(k, "Host"):
						got += "Host " + v
					case k == "X-Review9":
						id = v
					}
				}
				s.mu.Lock()
				s.seen[id] = got
				s.mu.Unlock()
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

// TestReview9HostDiff: for GET and CONNECT (whose request target is the
// host), URL hosts (upper case, ports, an empty port, IPv6 with and without
// a zone, IDNs, bytes a Host header may not carry) and req.Host overrides,
// ferry sends the Host header (and CONNECT target) net/http sends, or fails
// where net/http fails. Every connection is dialled to the loopback
// server, whatever the URL's host.
func TestReview9HostDiff(t *testing.T) {
	s := startReview9HostServer(t)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.ln.Addr().String())
	}
	std := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer std.CloseIdleConnections()
	fer := &Transport{DialContext: dial, DisableKeepAlives: true}
	defer fer.CloseIdleConnections()
	urlHosts := []string{
		"example.com", "Example.COM", "example.com:8080", "EXAMPLE.com:", "127.0.0.1:80",
		"[::1]", "[::1]:8080", "[fe80::1%25eth0]:80", "[FE80::1%25Eth0]", "bücher.example",
		"Bücher.example:81", "host_name", "a.b-c_d:1",
	}
	overrides := []string{
		"", "Override.Example", "override:1", "[::1]:9", "[fe80::1%eth0]:1", "[fe80::1%25eth0]",
		"bücher.example", "a b", "a/b", "a@b", "x:", ":80", "a%b", "\x80", "_:-", "[]",
	}
	n := 0
	run := func(rt http.RoundTripper, method string, u *url.URL, host string) (string, error) {
		n++
		id := strconv.Itoa(n)
		req := &http.Request{Method: method, URL: u, Host: host, Header: http.Header{"X-Review9": {id}}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		got, ok := s.seen[id]
		if !ok {
			got = "(not sent)"
		}
		return got, err
	}
	for _, method := range []string{"GET", "CONNECT"} {
		for _, uh := range urlHosts {
			for _, oh := range overrides {
				u := &url.URL{Scheme: "http", Host: uh, Path: "/"}
				if method == "CONNECT" {
					u.Path = "" // the request target is the host
				}
				want, wantErr := run(std, method, u, oh)
				got, err := run(fer, method, u, oh)
				if (err == nil) != (wantErr == nil) || got != want {
					t.Errorf("%s, URL host %q, req.Host %q: ferry sent %q (%v), net/http %q (%v)",
						method, uh, oh, got, err, want, wantErr)
				}
			}
		}
	}
}
