package h3conn

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// BenchmarkFallback measures the first request to an origin, end to end:
//
//	tcp_only   a fresh TLS connection over TCP and one GET (the baseline);
//	blackhole  a flight with DefaultHeadStart to a UDP socket that drops
//	           everything, waited for, then the same TCP request: the price
//	           of a network that eats UDP (budget: tcp_only + head start);
//	quic_ok    a flight to a live HTTP/3 server, then one GET over it.
//
// Run with -benchtime 5x or so: blackhole costs a head start per op.
func BenchmarkFallback(b *testing.B) {
	tcp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer tcp.Close()
	tcpClient := tcp.Client()
	tcpClient.Transport.(*http.Transport).DisableKeepAlives = true
	tcpGet := func(b *testing.B) {
		resp, err := tcpClient.Get(tcp.URL)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
			b.Fatalf("TCP response %d %q %v", resp.StatusCode, body, err)
		}
	}
	h3 := startH3(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), "localhost")
	bh := startBlackhole(b)

	b.Run("tcp_only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tcpGet(b)
		}
	})
	// flight starts a dial to addr and waits for it as a request would.
	flight := func(b *testing.B, d *Dialer, addr string) (*Conn, error) {
		fs := &Flights[string, string]{Max: 1, NewDialer: func() *Dialer { return d }}
		var conn *Conn
		f, _ := fs.Start("origin", addr, FlightJob{Host: "localhost", Addr: addr,
			Landed: func(c *Conn, err error) { conn = c }})
		req, _ := http.NewRequest("GET", "https://localhost/", nil)
		if done, _ := f.Wait(req, nil, nil, nil, nil); !done {
			return nil, ErrHeadStartExpired
		}
		return conn, f.Err()
	}
	b.Run("blackhole", func(b *testing.B) {
		b.ReportAllocs()
		d := NewDialer(Config{HandshakeTimeout: 2 * time.Second})
		defer d.Close()
		for b.Loop() {
			if _, err := flight(b, d, bh.addr()); !errors.Is(err, ErrHeadStartExpired) {
				b.Fatalf("a flight to a blackhole: %v", err)
			}
			tcpGet(b)
		}
	})
	b.Run("quic_ok", func(b *testing.B) {
		b.ReportAllocs()
		d := NewDialer(Config{TLSConfig: h3.clientConfig()})
		defer d.Close()
		for b.Loop() {
			c, err := flight(b, d, h3.addr())
			if err != nil {
				b.Fatalf("a flight to a live server: %v", err)
			}
			h3Get(b, c)
			c.Close()
		}
	})
	tcpClient.CloseIdleConnections()
}

// BenchmarkRoundTrip: GET on a warm HTTP/3 connection, through this
// package's Conn and through quic-go's own http3.Transport (the baseline).
func BenchmarkRoundTrip(b *testing.B) {
	s := startH3(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), "localhost")
	b.Run("h3conn", func(b *testing.B) {
		d := NewDialer(Config{TLSConfig: s.clientConfig()})
		defer d.Close()
		c := dialTest(b, d, s)
		b.ReportAllocs()
		for b.Loop() {
			h3Get(b, c)
		}
	})
	b.Run("http3_transport", func(b *testing.B) {
		tr := &http3.Transport{TLSClientConfig: s.clientConfig()}
		defer tr.Close()
		url := "https://" + s.addr() + "/"
		tr.TLSClientConfig.ServerName = "localhost"
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("GET", url, nil)
			resp, err := tr.RoundTrip(req)
			checkOK(b, resp, err)
		}
	})
}

func h3Get(b *testing.B, c *Conn) {
	req, _ := http.NewRequest("GET", "https://localhost/", nil)
	resp, err := c.RoundTrip(req)
	checkOK(b, resp, err)
}

func checkOK(b *testing.B, resp *http.Response, err error) {
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
		b.Fatalf("response %d %q %v", resp.StatusCode, body, err)
	}
}
