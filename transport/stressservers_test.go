package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// startStressH2 starts a TLS test server that speaks HTTP/2 with handler h
// and the server settings cfg (nil for the defaults), logging nothing. Its
// cleanup closes release first, which the handlers that hang wait on, and
// then the server, whose Close waits for its handlers.
func startStressH2(t *testing.T, release chan struct{}, h http.HandlerFunc, cfg *http.HTTP2Config) *httptest.Server {
	t.Helper()
	hs := httptest.NewUnstartedServer(h)
	hs.EnableHTTP2 = true
	hs.TLS = h3Cert(t).ServerConfig()
	hs.Config.ErrorLog = nilLogger()
	hs.Config.HTTP2 = cfg
	hs.StartTLS()
	t.Cleanup(func() { close(release); hs.Close() })
	return hs
}

// stressH2Client is the side's client for a startStressH2 server: std itself
// for "nethttp", or ferry's Transport made From it without HTTP/3 for
// "ferry" (then also returned as tr). std gets the test certificate and
// ForceAttemptHTTP2.
func stressH2Client(t *testing.T, side string, std *http.Transport) (rt http.RoundTripper, tr *Transport) {
	std.TLSClientConfig = h3Cert(t).ClientConfig()
	std.ForceAttemptHTTP2 = true
	if side != "ferry" {
		return std, nil
	}
	tr = From(std)
	tr.DisableHTTP3 = true
	return tr, tr
}

// stressEchoPost sends payload as a POST that cannot be replayed (no GetBody),
// with a hang guard, and returns the response's protocol and body.
func stressEchoPost(rt http.RoundTripper, u, payload string) (proto, body string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", u, io.NopCloser(strings.NewReader(payload)))
	if err != nil {
		return "", "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.Proto, string(b), err
}
