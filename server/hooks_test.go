package server

import (
	"context"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type ctxKey string

// TestHooksHonoured checks BaseContext, ConnContext and ConnState on every
// protocol: values from both contexts reach the handler, and ConnState sees
// each connection (over HTTP/3 as a *QUICConn) open and close.
func TestHooksHonoured(t *testing.T) {
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			var mu sync.Mutex // guards states and baseListeners
			states := map[http.ConnState]int{}
			var baseListeners []string
			closed := make(chan struct{}, 4)
			hs := &http.Server{
				BaseContext: func(l net.Listener) context.Context {
					mu.Lock()
					baseListeners = append(baseListeners, l.Addr().Network())
					mu.Unlock()
					return context.WithValue(context.Background(), ctxKey("base"), "b")
				},
				ConnContext: func(ctx context.Context, c net.Conn) context.Context {
					_, isQUIC := c.(*QUICConn)
					return context.WithValue(ctx, ctxKey("conn"), isQUIC)
				},
				ConnState: func(c net.Conn, s http.ConnState) {
					mu.Lock()
					states[s]++
					mu.Unlock()
					if s == http.StateClosed {
						closed <- struct{}{}
					}
				},
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					isQUIC, _ := r.Context().Value(ctxKey("conn")).(bool)
					_, hasServer := r.Context().Value(http.ServerContextKey).(*http.Server)
					w.Header().Set("X-Base", r.Context().Value(ctxKey("base")).(string))
					w.Header().Set("X-QUIC", map[bool]string{true: "yes", false: "no"}[isQUIC])
					w.Header().Set("X-Server", map[bool]string{true: "yes", false: "no"}[hasServer])
				}),
			}
			st := startTLS(t, hs, nil)
			client := newClient(t, p)
			resp, _ := get(t, client, st.url("/"))
			wantQUIC := map[bool]string{true: "yes", false: "no"}[p == h3]
			if resp.Header.Get("X-Base") != "b" || resp.Header.Get("X-QUIC") != wantQUIC || resp.Header.Get("X-Server") != "yes" {
				t.Errorf("context values: base %q quic %q server %q; want b %s yes",
					resp.Header.Get("X-Base"), resp.Header.Get("X-QUIC"), resp.Header.Get("X-Server"), wantQUIC)
			}
			client.CloseIdleConnections()
			if c, ok := client.Transport.(interface{ Close() error }); ok {
				c.Close() // http3.Transport: CloseIdleConnections does not close QUIC connections
			}
			<-closed
			mu.Lock()
			defer mu.Unlock()
			if states[http.StateNew] != 1 || states[http.StateClosed] != 1 {
				t.Errorf("ConnState counts %v, want one StateNew and one StateClosed", states)
			}
			wantNets := []string{"tcp", "udp"}
			if got := strings.Join(baseListeners, ","); got != strings.Join(wantNets, ",") && got != "udp,tcp" {
				t.Errorf("BaseContext called for %v, want once per listener (tcp and udp)", baseListeners)
			}
		})
	}
}

// TestEveryHTTPServerFieldCopied sets every exported field of http.Server
// to a non-zero value and checks the private copy holds all of them, so a
// field added by a future Go cannot be dropped silently.
func TestEveryHTTPServerFieldCopied(t *testing.T) {
	src := &http.Server{}
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		case reflect.Func:
			f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value { return nil }))
		case reflect.Interface:
			f.Set(reflect.ValueOf(http.NewServeMux()))
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		default:
			t.Fatalf("field %s of kind %s: extend this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	dst := reflect.ValueOf(copyHTTPServer(src)).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if !v.Type().Field(i).IsExported() {
			continue
		}
		a, b := v.Field(i), dst.Field(i)
		same := false
		switch a.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Func:
			same = a.Pointer() == b.Pointer()
		case reflect.Interface:
			same = a.Interface() == b.Interface()
		default:
			same = reflect.DeepEqual(a.Interface(), b.Interface())
		}
		if !same {
			t.Errorf("field %s not copied", name)
		}
	}
}

// TestHTTP3Limits checks that the HTTP/3 side takes its limits from the
// http.Server: MaxHeaderBytes rejects an oversized header block on every
// protocol, and the derived timeouts match net/http's rules.
func TestHTTP3Limits(t *testing.T) {
	st := startTLS(t, &http.Server{Handler: echoProto, MaxHeaderBytes: 2048}, nil)
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			client := newClient(t, p)
			req, _ := http.NewRequest("GET", st.url("/"), nil)
			req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode < 400 {
					t.Fatalf("16 KiB header accepted with status %d, MaxHeaderBytes 2048", resp.StatusCode)
				}
			}
			// A small request on a fresh client still works.
			if resp, body := get(t, newClient(t, p), st.url("/")); resp.StatusCode != 200 || body != string(p) {
				t.Fatalf("small request: status %d body %q", resp.StatusCode, body)
			}
		})
	}

	hs := &http.Server{ReadHeaderTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 4 * time.Second}
	if got := quicConfig(nil, hs).HandshakeIdleTimeout; got != 3*time.Second {
		t.Errorf("handshake timeout %v, want the smallest of the three (3s)", got)
	}
	h3 := newHTTP3Server(hs, http.NotFoundHandler(), &quicConns{})
	if h3.IdleTimeout != 5*time.Second {
		t.Errorf("HTTP/3 idle timeout %v, want ReadTimeout (5s) when IdleTimeout is zero", h3.IdleTimeout)
	}
	if hh, ok := h3.Handler.(*h3Handler); !ok || hh.read != 5*time.Second || hh.write != 4*time.Second {
		t.Errorf("HTTP/3 handler %#v does not set per-request deadlines from ReadTimeout/WriteTimeout", h3.Handler)
	}
}
