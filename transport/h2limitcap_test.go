package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h2conn"
	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// errLimitRefused is what limitRefuser's refusals wrap.
var errLimitRefused = errors.New("test: stream limit")

// limitRefuser is the RoundTripper a TLSNextProto entry returns for a real
// TLS connection: it refuses every request as internal/h2conn refuses a
// granted stream that found the connection full (ReasonStreamLimit,
// nothing sent), counting the attempts. Such a shared connection stays
// usable, so every retry finds it again.
type limitRefuser struct {
	mu       sync.Mutex // guards attempts and conns
	attempts int
	conns    []*tls.Conn
}

func (l *limitRefuser) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.attempts++
	l.mu.Unlock()
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, &h2conn.NotProcessedError{Reason: h2conn.ReasonStreamLimit, BodyUnread: true, Err: errLimitRefused}
}

func (l *limitRefuser) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts
}

func (l *limitRefuser) closeConns() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// TestH2StreamLimitRefusalsCapped: stream-limit refusals are retried at once
// and not counted, on the argument that each needs a new event on the
// connection; a connection that refused every time would spin the request
// until its context ended. After maxLimitRefusals the refusals are counted
// retries with net/http's backoff, so the request ends with the last
// refusal's error after maxLimitRefusals + maxSharedRetries + 1 attempts.
func TestH2StreamLimitRefusalsCapped(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(http.NotFoundHandler())
	hs.EnableHTTP2 = true
	hs.TLS = cert.ServerConfig()
	hs.Config.ErrorLog = nilLogger()
	hs.StartTLS()
	t.Cleanup(hs.Close)

	refuser := &limitRefuser{}
	t.Cleanup(refuser.closeConns)
	cc := cert.ClientConfig()
	cc.NextProtos = []string{"h2"}
	tr := &Transport{
		TLSClientConfig: cc,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{"h2": func(_ string, c *tls.Conn) http.RoundTripper {
			refuser.mu.Lock()
			refuser.conns = append(refuser.conns, c)
			refuser.mu.Unlock()
			return refuser
		}},
	}
	tr.h2.backoffUnit = time.Millisecond
	defer tr.CloseIdleConnections()
	// Hang guard only: before the cap the request spun until it ended.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = tr.RoundTrip(newReq(t, "GET", hs.URL+"/", nil).WithContext(ctx))
	if !errors.Is(err, errLimitRefused) {
		t.Fatalf("err = %v, want the last refusal's error", err)
	}
	if got, want := refuser.count(), maxLimitRefusals+maxSharedRetries+1; got != want {
		t.Fatalf("%d attempts, want %d", got, want)
	}
}
