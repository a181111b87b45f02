package altsvc

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	h3 := func(host string, port uint16) Service {
		return Service{Protocol: "h3", Host: host, Port: port, MaxAge: DefaultMaxAge}
	}
	tests := []struct {
		name    string
		values  []string
		want    Header
		skipped int // *ParseError count
	}{
		{"same host", []string{`h3=":443"`}, Header{Services: []Service{h3("", 443)}}, 0},
		{"other host", []string{`h3="alt.example.com:8443"`}, Header{Services: []Service{h3("alt.example.com", 8443)}}, 0},
		{"host normalised", []string{`h3="ALT.Example.COM:8443"`}, Header{Services: []Service{h3("alt.example.com", 8443)}}, 0},
		{"IDNA host", []string{`h3="bücher.example:443"`}, Header{Services: []Service{h3("xn--bcher-kva.example", 443)}}, 0},
		{"IPv6 host", []string{`h3="[::1]:8443"`}, Header{Services: []Service{h3("::1", 8443)}}, 0},
		{"several alternatives in order", []string{`h3=":443"; ma=60, h2="alt:443"`}, Header{Services: []Service{
			{Protocol: "h3", Port: 443, MaxAge: time.Minute},
			{Protocol: "h2", Host: "alt", Port: 443, MaxAge: DefaultMaxAge},
		}}, 0},
		{"several header lines", []string{`h3=":443"`, `h3-29=":8443"`}, Header{Services: []Service{
			h3("", 443), {Protocol: "h3-29", Port: 8443, MaxAge: DefaultMaxAge},
		}}, 0},
		{"ma and persist", []string{`h3=":443"; ma=3600; persist=1`}, Header{Services: []Service{
			{Protocol: "h3", Port: 443, MaxAge: time.Hour, Persist: true},
		}}, 0},
		{"persist other than 1 ignored", []string{`h3=":443";persist=2`}, Header{Services: []Service{h3("", 443)}}, 0},
		{"quoted ma", []string{`h3=":443"; ma="120"`}, Header{Services: []Service{{Protocol: "h3", Port: 443, MaxAge: 2 * time.Minute}}}, 0},
		{"uppercase parameter names", []string{`h3=":443"; MA=5; Persist=1`}, Header{Services: []Service{{Protocol: "h3", Port: 443, MaxAge: 5 * time.Second, Persist: true}}}, 0},
		{"first ma wins", []string{`h3=":443"; ma=5; ma=10`}, Header{Services: []Service{{Protocol: "h3", Port: 443, MaxAge: 5 * time.Second}}}, 0},
		{"ma zero", []string{`h3=":443"; ma=0`}, Header{Services: []Service{{Protocol: "h3", Port: 443}}}, 0},
		{"huge ma saturates", []string{`h3=":443"; ma=99999999999999999999999`}, Header{Services: []Service{{Protocol: "h3", Port: 443, MaxAge: maxMaxAgeSeconds * time.Second}}}, 0},
		{"unknown parameters ignored", []string{`h3=":443"; foo=bar; v="1,2"; ma=7`}, Header{Services: []Service{{Protocol: "h3", Port: 443, MaxAge: 7 * time.Second}}}, 0},
		{"percent-encoded protocol id", []string{`w%3Dx%3Ay=":443"`}, Header{Services: []Service{{Protocol: "w=x:y", Port: 443, MaxAge: DefaultMaxAge}}}, 0},
		{"percent-encoded percent", []string{`a%25b=":443"`}, Header{Services: []Service{{Protocol: "a%b", Port: 443, MaxAge: DefaultMaxAge}}}, 0},
		{"whitespace and empty elements", []string{` , h3=":443" ,, `}, Header{Services: []Service{h3("", 443)}}, 0},
		{"trailing semicolon tolerated", []string{`h3=":443";`}, Header{Services: []Service{h3("", 443)}}, 0},
		{"escaped quote in authority", []string{`h3="\:443"`}, Header{Services: []Service{h3("", 443)}}, 0},
		{"clear", []string{"clear"}, Header{Clear: true}, 0},
		{"clear with whitespace", []string{"  clear "}, Header{Clear: true}, 0},
		{"clear is case-sensitive", []string{"CLEAR"}, Header{}, 1},
		{"clear mixed with alternatives", []string{`clear`, `h3=":443"`}, Header{Services: []Service{h3("", 443)}}, 1},
		{"empty", []string{""}, Header{}, 0},
		{"no values", nil, Header{}, 0},

		{"malformed kept others", []string{`h3=":99999", h3=":443"`}, Header{Services: []Service{h3("", 443)}}, 1},
		{"unquoted authority", []string{`h3=:443, h2=":443"`}, Header{Services: []Service{{Protocol: "h2", Port: 443, MaxAge: DefaultMaxAge}}}, 1},
		{"no port", []string{`h3="alt.example.com"`}, Header{}, 1},
		{"port zero", []string{`h3=":0"`}, Header{}, 1},
		{"port not a number", []string{`h3=":https"`}, Header{}, 1},
		{"no equals", []string{`h3`}, Header{}, 1},
		{"empty protocol", []string{`=":443"`}, Header{}, 1},
		{"bad percent-encoding", []string{`h%3=":443"`, `h%zz=":443"`}, Header{}, 2},
		{"bad ma", []string{`h3=":443"; ma=-1`, `h3=":443"; ma=1.5`, `h3=":443"; ma=""`}, Header{}, 3},
		{"bad parameter", []string{`h3=":443"; ma`, `h3=":443"; =1`, `h3=":443" junk`}, Header{}, 3},
		{"unterminated quote", []string{`h3=":443, h2=":443"`}, Header{}, 1},
		{"unterminated quote keeps other lines", []string{`h3="`, `h2=":443"`}, Header{Services: []Service{{Protocol: "h2", Port: 443, MaxAge: DefaultMaxAge}}}, 1},
		{"IPv6 without brackets", []string{`h3="::1:443"`}, Header{}, 1},
		{"bad host", []string{`h3="a b:443"`, `h3="a/b:443"`, `h3="[zz]:443"`}, Header{}, 3},
		{"control character", []string{"h3=\":4\x0143\""}, Header{}, 1},
		{"non-token protocol", []string{`h 3=":443"`}, Header{}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.values)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.values, got, tc.want)
			}
			if n := countParseErrors(err); n != tc.skipped {
				t.Errorf("Parse(%q) reported %d skipped alternatives, want %d (err: %v)", tc.values, n, tc.skipped, err)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

// countParseErrors counts the *ParseError values joined in err.
func countParseErrors(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range j.Unwrap() {
			n += countParseErrors(e)
		}
		return n
	}
	var pe *ParseError
	if errors.As(err, &pe) {
		return 1
	}
	return 0
}

func TestParseErrorNamesTheAlternative(t *testing.T) {
	_, err := Parse([]string{`h3=":443", h2=":0"`})
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *ParseError", err)
	}
	if pe.Value != `h2=":0"` || pe.Reason == "" {
		t.Errorf("ParseError = %+v, want the skipped alternative and a reason", pe)
	}
}

func TestProtocolIDEncodingRoundTrip(t *testing.T) {
	for _, p := range []string{"h3", "h3-29", "a b", "w=x:y", "100%", "\x00\xff", `"q"`} {
		enc := encodeProtocolID(p)
		dec, err := decodeProtocolID(enc)
		if err != nil || dec != p {
			t.Errorf("decode(encode(%q)) = %q (via %q), %v", p, dec, enc, err)
		}
	}
}
