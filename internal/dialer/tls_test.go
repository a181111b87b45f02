//go:build linux

package dialer

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// startTLSServer starts a loopback TLS server (reading drives its
// handshake) with a throw-away certificate for localhost.
func startTLSServer(t *testing.T) (*selfsigned.Cert, *server) {
	cert, err := selfsigned.New("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tlsLn, err := tls.Listen("tcp", "127.0.0.1:0", cert.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cert, serve(t, tlsLn)
}

func TestHandshakeTLS(t *testing.T) {
	cert, tlsSrv := startTLSServer(t)
	silent := listen(t, "127.0.0.1:0")
	d := &Dialer{}

	t.Run("ok", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, tlsSrv.port)
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		var state tls.ConnectionState
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			TLSHandshakeStart: func() { events = append(events, "start") },
			TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
				events = append(events, "done")
				state = cs
			},
		})
		cfg := cert.ClientConfig()
		cfg.ServerName = "localhost"
		tc, err := HandshakeTLS(ctx, raw, cfg, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		if !slices.Equal(events, []string{"start", "done"}) || !state.HandshakeComplete {
			t.Fatalf("hooks %q, state complete=%v", events, state.HandshakeComplete)
		}
	})
	t.Run("server never answers: timeout", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, silent.port)
		if err != nil {
			t.Fatal(err)
		}
		var doneErr error
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			TLSHandshakeDone: func(_ tls.ConnectionState, err error) { doneErr = err },
		})
		_, err = HandshakeTLS(ctx, raw, &tls.Config{ServerName: "localhost"}, 50*time.Millisecond)
		var ne net.Error
		if !errors.Is(err, ErrTLSHandshakeTimeout) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err = %v, want ErrTLSHandshakeTimeout with Timeout()", err)
		}
		if doneErr != err {
			t.Fatalf("TLSHandshakeDone got %v", doneErr)
		}
		if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("raw conn not closed after failure: write err %v", err)
		}
	})
	t.Run("context cancelled", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, silent.port)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{TLSHandshakeStart: cancel})
		_, err = HandshakeTLS(ctx, raw, &tls.Config{ServerName: "localhost"}, time.Minute)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("bad certificate", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, tlsSrv.port)
		if err != nil {
			t.Fatal(err)
		}
		_, err = HandshakeTLS(t.Context(), raw, &tls.Config{ServerName: "localhost"}, 5*time.Second)
		var ue *tls.CertificateVerificationError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want a certificate verification error", err)
		}
		if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("raw conn not closed after failure: %v", err)
		}
	})
	t.Run("nil config", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, silent.port)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := HandshakeTLS(t.Context(), raw, nil, 0); err == nil {
			t.Fatal("nil config accepted")
		}
		if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("raw conn not closed: %v", err)
		}
		if _, err := HandshakeTLS(t.Context(), nil, &tls.Config{}, 0); err == nil {
			t.Fatal("nil conn accepted")
		}
	})
}

// wrappedTLS is a caller's TLS connection that is not a *tls.Conn: the
// handshake and state come from the embedded *tls.Conn through a wrapper.
type wrappedTLS struct {
	net.Conn
	tc *tls.Conn
}

func (w wrappedTLS) HandshakeContext(ctx context.Context) error { return w.tc.HandshakeContext(ctx) }
func (w wrappedTLS) ConnectionState() tls.ConnectionState       { return w.tc.ConnectionState() }

// stateOnly reports a fixed TLS state and has no handshake of its own.
type stateOnly struct {
	net.Conn
	state tls.ConnectionState
}

func (s stateOnly) ConnectionState() tls.ConnectionState { return s.state }

func TestHandshakeStater(t *testing.T) {
	cert, tlsSrv := startTLSServer(t)
	d := &Dialer{}
	traced := func(events *[]string, state *tls.ConnectionState, doneErr *error) context.Context {
		return httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			TLSHandshakeStart: func() { *events = append(*events, "start") },
			TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
				*events = append(*events, "done")
				*state, *doneErr = cs, err
			},
		})
	}

	t.Run("wrapper handshakes", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, tlsSrv.port)
		if err != nil {
			t.Fatal(err)
		}
		cfg := cert.ClientConfig()
		cfg.ServerName = "localhost"
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(raw, cfg)
		w := wrappedTLS{Conn: tc, tc: tc}
		defer w.Close()
		var events []string
		var state tls.ConnectionState
		var doneErr error
		if err := HandshakeStater(traced(&events, &state, &doneErr), w, w); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(events, []string{"start", "done"}) || !state.HandshakeComplete || doneErr != nil {
			t.Fatalf("hooks %q, complete=%v, err %v", events, state.HandshakeComplete, doneErr)
		}
	})
	t.Run("wrapper handshake fails: closed", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, tlsSrv.port)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(raw, &tls.Config{ServerName: "localhost"}) // untrusted certificate
		w := wrappedTLS{Conn: tc, tc: tc}
		var events []string
		var state tls.ConnectionState
		var doneErr error
		err = HandshakeStater(traced(&events, &state, &doneErr), w, w)
		var ue *tls.CertificateVerificationError
		if !errors.As(err, &ue) || doneErr != err || !slices.Equal(events, []string{"start", "done"}) {
			t.Fatalf("err %v, Done err %v, hooks %q", err, doneErr, events)
		}
		if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("conn not closed after failure: %v", err)
		}
	})
	t.Run("state only: hooks report it", func(t *testing.T) {
		raw, err := d.DialAddrs(t.Context(), []netip.Addr{v4}, tlsSrv.port)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		s := stateOnly{Conn: raw, state: tls.ConnectionState{NegotiatedProtocol: "h2", HandshakeComplete: true}}
		var events []string
		var state tls.ConnectionState
		var doneErr error
		if err := HandshakeStater(traced(&events, &state, &doneErr), s, s); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(events, []string{"start", "done"}) || state.NegotiatedProtocol != "h2" {
			t.Fatalf("hooks %q, state %+v", events, state)
		}
	})
}
