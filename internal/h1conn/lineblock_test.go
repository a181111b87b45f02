package h1conn

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestLineBlockReaders covers the two readers built on readLineBlock: a
// trailer section (which may be empty) and a response head too long for the
// read buffer (whose first line is the status line, never the end), with
// their own errors for a block over the limit and a stream that ends early.
func TestLineBlockReaders(t *testing.T) {
	longField := "X-Long: " + strings.Repeat("v", 100) + "\r\n"
	for _, tc := range []struct {
		name    string
		read    func(*bufio.Reader, int64) (string, error)
		in      string
		limit   int64
		want    string
		wantErr func(error) bool
	}{
		{name: "trailer/empty", read: readFieldBlock, in: "\r\nrest", limit: 100, want: "\r\n"},
		{name: "trailer/fields", read: readFieldBlock, in: "A: 1\r\nB: 2\n\nrest", limit: 100, want: "A: 1\r\nB: 2\n\n"},
		{name: "trailer/over-limit", read: readFieldBlock, in: longField + "\r\n", limit: 50,
			wantErr: func(err error) bool { return err == errTrailerTooLong }},
		{name: "trailer/eof", read: readFieldBlock, in: "A: 1\r\n", limit: 100,
			wantErr: func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{name: "head/long-field", read: readLongHead, in: "HTTP/1.1 200 OK\r\n" + longField + "\r\nbody", limit: 1000,
			want: "HTTP/1.1 200 OK\r\n" + longField + "\r\n"},
		{name: "head/first-line-blank-is-not-the-end", read: readLongHead, in: "\r\nHTTP/1.1 200 OK\r\n\r\n", limit: 100,
			want: "\r\nHTTP/1.1 200 OK\r\n\r\n"},
		{name: "head/over-limit", read: readLongHead, in: "HTTP/1.1 200 OK\r\n" + longField + "\r\n", limit: 60,
			wantErr: func(err error) bool { var h headerLimitError; return errors.As(err, &h) }},
		{name: "head/eof", read: readLongHead, in: "HTTP/1.1 200 OK\r\n", limit: 100,
			wantErr: func(err error) bool { return err == io.ErrUnexpectedEOF }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 16) // smaller than a line
			got, err := tc.read(br, tc.limit)
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("got %q, %v; want the case's error", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
