package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

func TestBadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	goodCert, goodKey, err := testCert.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := selfsigned.New()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.pem", []byte("not a pem file"))
	otherKey := write("other-key.pem", other.KeyPEM)
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name              string
		certFile, keyFile string
		wantInErr         []string
	}{
		{"missing cert", missing, goodKey, []string{missing}},
		{"missing key", goodCert, missing, []string{missing}},
		{"cert not PEM", garbage, goodKey, []string{garbage, "CERTIFICATE"}},
		{"key not PEM", goodCert, garbage, []string{garbage, "PRIVATE KEY"}},
		{"cert and key swapped", goodKey, goodCert, []string{goodKey, "CERTIFICATE"}},
		{"key of another cert", goodCert, otherKey, []string{goodCert, otherKey}},
		{"no files and no certificate in TLSConfig", "", "", []string{"certificate and key"}},
		{"only a cert file", goodCert, "", []string{"certificate and key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := Wrap(&http.Server{Addr: "127.0.0.1:0"})
			err := srv.ListenTLS(tt.certFile, tt.keyFile)
			if err == nil {
				srv.Close()
				t.Fatal("ListenTLS succeeded")
			}
			for _, s := range tt.wantInErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if srv.Addr() != nil {
				t.Errorf("a socket was bound (%v) although the key pair failed", srv.Addr())
			}
			// A failed start leaves the Server usable.
			if err := srv.ListenTLS(goodCert, goodKey); err != nil {
				t.Fatalf("ListenTLS with good files after a failure: %v", err)
			}
			srv.Close()
		})
	}
}

// TestCertificateFromTLSConfig serves with no file names, the certificate
// coming from the user's TLSConfig, and checks the user's config is not
// modified (it is cloned for TCP and for QUIC).
func TestCertificateFromTLSConfig(t *testing.T) {
	cfg := testCert.ServerConfig()
	srv := Wrap(&http.Server{Addr: "127.0.0.1:0", Handler: echoProto, TLSConfig: cfg})
	if err := srv.ListenTLS("", ""); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	defer func() { srv.Close(); <-errc }()
	_, port, _ := netSplitPort(srv.Addr().String())
	for _, p := range allProtocols {
		resp, body := get(t, newClient(t, p), "https://127.0.0.1:"+port+"/")
		if resp.StatusCode != 200 || body != string(p) {
			t.Errorf("%s: status %d body %q", p, resp.StatusCode, body)
		}
	}
	if len(cfg.NextProtos) != 0 {
		t.Errorf("user TLSConfig.NextProtos modified to %v", cfg.NextProtos)
	}
}
