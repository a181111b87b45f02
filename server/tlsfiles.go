package server

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// loadKeyPair reads a PEM certificate chain and private key, and names the
// file at fault in every error: a missing or unreadable file, a file without
// the PEM block it should hold, or a key that does not match the certificate.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, errors.New("server: certificate and key file names must both be set, or both be empty with TLSConfig holding a certificate")
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: reading certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: reading key file: %w", err)
	}
	if !hasPEMBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, fmt.Errorf("server: certificate file %s: no PEM CERTIFICATE block", certFile)
	}
	if !hasPEMBlock(keyPEM, func(t string) bool { return t == "PRIVATE KEY" || strings.HasSuffix(t, " PRIVATE KEY") }) {
		return tls.Certificate{}, fmt.Errorf("server: key file %s: no PEM PRIVATE KEY block", keyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: certificate file %s with key file %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}

// hasPEMBlock reports whether data holds a PEM block whose type passes want.
func hasPEMBlock(data []byte, want func(string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if want(b.Type) {
			return true
		}
	}
}

// tlsConfigs returns the TLS configuration for the TCP side (a clone of
// user, plus the certificate from the files when given; net/http adds the
// h2/http1.1 ALPN itself) and for QUIC (the same, with ALPN "h3" only).
func tlsConfigs(user *tls.Config, certFile, keyFile string) (tcp, quic *tls.Config, err error) {
	var cfg *tls.Config
	if user != nil {
		cfg = user.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if certFile != "" || keyFile != "" || !tlsHasCert(cfg) {
		pair, err := loadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, nil, err
		}
		// The files replace whatever certificates TLSConfig had, as
		// http.Server.ServeTLS does.
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, quicTLSConfig(cfg), nil
}
