package transport

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/benchchild"
)

func TestNewDefaultsMatchDefaultTransport(t *testing.T) {
	d := http.DefaultTransport.(*http.Transport)
	n := New()
	if n.Proxy == nil || n.DialContext != nil {
		t.Fatal("New: want Proxy set and DialContext nil (ferry dials itself)")
	}
	if n.MaxIdleConns != d.MaxIdleConns || n.IdleConnTimeout != d.IdleConnTimeout ||
		n.TLSHandshakeTimeout != d.TLSHandshakeTimeout || n.ExpectContinueTimeout != d.ExpectContinueTimeout ||
		n.ForceAttemptHTTP2 != d.ForceAttemptHTTP2 {
		t.Fatalf("New() = %+v differs from http.DefaultTransport", n)
	}
}

// TestFromCopiesEveryField: every exported field of http.Transport exists
// on Transport with the same type, and From copies each one.
func TestFromCopiesEveryField(t *testing.T) {
	st := reflect.TypeOf(http.Transport{})
	ft := reflect.TypeOf(Transport{})
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		g, ok := ft.FieldByName(f.Name)
		if !ok || g.Type != f.Type {
			t.Errorf("field %s %v: missing or different type on Transport", f.Name, f.Type)
		}
	}
	src := &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "x"}, TLSHandshakeTimeout: 1, DisableKeepAlives: true,
		DisableCompression: true, MaxIdleConns: 2, MaxIdleConnsPerHost: 3, MaxConnsPerHost: 4,
		IdleConnTimeout: 5, ResponseHeaderTimeout: 6, ExpectContinueTimeout: 7,
		ProxyConnectHeader: http.Header{"A": {"b"}}, MaxResponseHeaderBytes: 8, WriteBufferSize: 9,
		ReadBufferSize: 10, ForceAttemptHTTP2: true, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 11},
		Protocols: new(http.Protocols),
	}
	got := From(src)
	sv, gv := reflect.ValueOf(src).Elem(), reflect.ValueOf(got).Elem()
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if !f.IsExported() || f.Type.Kind() == reflect.Func {
			continue
		}
		a, b := sv.Field(i).Interface(), gv.FieldByName(f.Name).Interface()
		if f.Name == "TLSClientConfig" {
			if got.TLSClientConfig == src.TLSClientConfig || got.TLSClientConfig.ServerName != "x" {
				t.Error("TLSClientConfig not cloned")
			}
			continue
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("From: field %s = %v, want %v", f.Name, b, a)
		}
	}
	c := got.Clone()
	if c.TLSClientConfig == got.TLSClientConfig || c.TLSClientConfig.ServerName != "x" {
		t.Error("Clone: TLSClientConfig not cloned")
	}
	if c.HTTP2 == got.HTTP2 || c.Protocols == got.Protocols {
		t.Error("Clone: HTTP2 or Protocols shared with the original")
	}
	cv := reflect.ValueOf(c).Elem()
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if !f.IsExported() || f.Type.Kind() == reflect.Func || f.Name == "TLSClientConfig" {
			continue
		}
		if a, b := gv.FieldByName(f.Name).Interface(), cv.FieldByName(f.Name).Interface(); !reflect.DeepEqual(a, b) {
			t.Errorf("Clone: field %s = %v, want %v", f.Name, b, a)
		}
	}
}

// TestDNSOncePerConnection: ferry resolves a name only when it dials;
// pooled requests fire no DNS hook.
func TestDNSOncePerConnection(t *testing.T) {
	srv := startHandlerServer(t, hello, false, nil)
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	var lookups atomic.Int32
	trace := &httptrace.ClientTrace{DNSStart: func(httptrace.DNSStartInfo) { lookups.Add(1) }}
	for i := 0; i < 10; i++ {
		req := newReq(t, "GET", url, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("%d DNS lookups for 10 requests on one pooled connection, want 1", n)
	}
}

// TestAllocsPerRoundTrip holds the allocation budget (<= 12) for a GET on
// a reused connection.
func TestAllocsPerRoundTrip(t *testing.T) {
	// An allocation-free in-process server, so AllocsPerRun (which counts
	// the whole process) sees only the client.
	resp := benchResponse(4)
	srv := startRawServer(t, func(c *rawConn) { benchchild.ServeCannedHTTP1(c.Conn, resp) })
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	req := newReq(t, "GET", srv.URL, nil)
	buf := make([]byte, 512)
	do := func() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := io.ReadFull(resp.Body, buf[:benchBodyLen]); n != benchBodyLen {
			t.Fatal("short body")
		}
		resp.Body.Read(buf)
		resp.Body.Close()
	}
	do()
	time.Sleep(time.Millisecond)
	if a := testing.AllocsPerRun(50, do); a > 12 {
		t.Fatalf("%.1f allocations per RoundTrip, budget 12", a)
	}
}
