// Package selfsigned makes throw-away TLS certificates for tests and demos.
//
// New generates, in memory, an ECDSA P-256 key and a self-signed certificate
// valid for the given hosts (DNS names or IP literals; by default
// "localhost", 127.0.0.1 and ::1). The result carries the tls.Certificate a
// server presents, the *x509.CertPool a client needs to trust it, and the
// PEM encodings, which WriteFiles puts on disk for APIs that take file names
// (http.Server.ListenAndServeTLS). Nothing here is fit for production: the
// key never leaves memory unless written, and nothing rotates or revokes it.
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultHosts are the names New certifies when it is given none: every
// loopback spelling a local client is likely to dial.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// validity is how long a generated certificate lasts; NotBefore is set an
// hour in the past so that small clock differences never reject it.
const validity = 7 * 24 * time.Hour

// Cert is a generated certificate and everything needed to use it.
type Cert struct {
	// TLS is the certificate and private key, ready for tls.Config.Certificates.
	TLS tls.Certificate
	// Pool trusts exactly this certificate; set it as a client's RootCAs.
	Pool *x509.CertPool
	// Leaf is the parsed certificate (also in TLS.Leaf).
	Leaf *x509.Certificate
	// CertPEM is the certificate, PEM encoded ("CERTIFICATE").
	CertPEM []byte
	// KeyPEM is the private key, PEM encoded ("PRIVATE KEY", PKCS #8).
	KeyPEM []byte
}

// New generates a self-signed certificate for hosts. An entry that parses as
// an IP address becomes an IP SAN, anything else a DNS SAN; with no hosts
// DefaultHosts are used. An empty or space-containing host is an error.
func New(hosts ...string) (*Cert, error) {
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("selfsigned: serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"ferry self-signed"}, CommonName: hosts[0]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, " \t\r\n") {
			return nil, fmt.Errorf("selfsigned: invalid host %q", h)
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: create certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: parse certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: marshal key: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &Cert{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Pool:    pool,
		Leaf:    leaf,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ServerConfig returns a fresh tls.Config presenting this certificate.
func (c *Cert) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.TLS}}
}

// ClientConfig returns a fresh tls.Config that trusts only this certificate.
func (c *Cert) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.Pool}
}

// File names WriteFiles uses inside the directory it is given.
const (
	CertFileName = "cert.pem"
	KeyFileName  = "key.pem"
)

// WriteFiles writes the certificate to dir/cert.pem (mode 0644) and the key
// to dir/key.pem (mode 0600), replacing existing files, and returns both
// paths. dir must exist; errors name the file that could not be written.
func (c *Cert) WriteFiles(dir string) (certFile, keyFile string, err error) {
	if dir == "" {
		return "", "", errors.New("selfsigned: empty directory name")
	}
	certFile = filepath.Join(dir, CertFileName)
	keyFile = filepath.Join(dir, KeyFileName)
	if err := os.WriteFile(certFile, c.CertPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("selfsigned: write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("selfsigned: write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}
