package h1conn

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Whole heads parsed as a connection parses them are compared with
// net/http's http.ReadResponse on the same bytes (the Host headers ferry
// sends are compared with net/http's in transport/hostheader_test.go).

// parseLikeConn parses data as ferry does on a connection (bufio buffer of
// bufSize, so that both the one-pass scan and the line-by-line path for
// long heads are used), with spare values when spare > 0.
func parseLikeConn(data []byte, bufSize, spare int) (*http.Response, error) {
	pc := &Conn{cfg: testConfig(), conn: nopConn{}}
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

// compareWithReadResponse parses data with ferry and with http.ReadResponse and
// reports any difference in status, protocol, header or error text. data
// must not hold framing or connection keys (net/http's ReadResponse edits
// those in the header).
func compareWithReadResponse(t *testing.T, data []byte) {
	t.Helper()
	ref, refErr := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	for _, size := range []int{16, 4096} {
		for _, spare := range []int{0, 1, 8} {
			got, err := parseLikeConn(data, size, spare)
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

// collidingKeys returns pairs of different canonical keys that share
// a filter bit, found by search so that they stay colliding if
// keyFilterBit changes.
func collidingKeys(n int) []string {
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

// TestHeadMatchesReadResponse: heads made of keys that repeat, fold to a key seen
// before ("content-type" after "Content-Type"), share filter bits, carry a
// space before the colon, bytes above 127, obs-fold lines, bare LFs and
// invalid bytes parse exactly as net/http parses them.
func TestHeadMatchesReadResponse(t *testing.T) {
	keys := []string{
		"Content-Type", "content-type", "CONTENT-TYPE", "Content-type", "Content-Type ",
		"content-type ", "Set-Cookie", "set-cookie", "X-A", "x-a", "X A", "x a", "A", "a",
		"Vary", "vary", "ETag", "Etag", "X-\x80", "\x80", "X_Y", "x_y", "Www-Authenticate",
		"www-authenticate", "-a", "a-", "X--y", "x--Y", "K\t", "Ké",
	}
	keys = append(keys, collidingKeys(6)...)
	for _, k := range collidingKeys(6) {
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
		compareWithReadResponse(t, []byte(b.String()))
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
		compareWithReadResponse(t, []byte(s))
	}
}

// FuzzHeadMatchesReadResponse compares ferry's head parser with http.ReadResponse
// on arbitrary header lines after a fixed status line (framing and
// connection keys left out: ReadResponse edits them).
func FuzzHeadMatchesReadResponse(f *testing.F) {
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
		compareWithReadResponse(t, data)
	})
}
