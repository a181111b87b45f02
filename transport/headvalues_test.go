package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
)

// TestHeaderValuesBacking checks that header values backed by the response's
// own allocation stay intact: a 1xx header kept by Got1xxResponse is not
// overwritten by the final head, and heads with more fields than the spare
// array holds keep every value.
func TestHeaderValuesBacking(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString("X-F" + strconv.Itoa(i) + ": v" + strconv.Itoa(i) + "\r\n")
		}
		return b.String()
	}
	tests := []struct {
		name   string
		raw    string
		fields int // X-F<i> fields in the final head
		hints  string
	}{
		{"one 1xx then final", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nX-Hint: one\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + many(3) + "\r\n", 3, "</a>"},
		{"final over spare", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + many(20) + "\r\n", 20, ""},
		{"1xx over spare", "HTTP/1.1 103 Early Hints\r\nLink: </b>\r\n" + many(12) + "\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + many(9) + "\r\n", 9, "</b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				io.WriteString(c, tt.raw)
			}()
			tr := &Transport{}
			defer tr.CloseIdleConnections()
			var hints []http.Header
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, http.Header(h))
				return nil
			}}
			ctx := httptrace.WithClientTrace(context.Background(), trace)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for i := 0; i < tt.fields; i++ {
				k, want := "X-F"+strconv.Itoa(i), "v"+strconv.Itoa(i)
				if got := resp.Header.Values(k); len(got) != 1 || got[0] != want {
					t.Errorf("final %s = %q, want [%q]", k, got, want)
				}
			}
			if tt.hints == "" {
				if len(hints) != 0 {
					t.Fatalf("got %d 1xx heads, want 0", len(hints))
				}
			} else {
				if len(hints) != 1 {
					t.Fatalf("got %d 1xx heads, want 1", len(hints))
				}
				if got := hints[0]["Link"]; len(got) != 1 || got[0] != tt.hints {
					t.Errorf("1xx Link = %q after the final head, want [%q]", got, tt.hints)
				}
			}
			<-done
		})
	}
}
