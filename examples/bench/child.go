package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// The server runs in a child process (this program re-executed with
// childEnv set) so that the client's CPU time, allocations and syscalls
// measured in the parent are the client's alone.

const (
	childEnv     = "FERRY_BENCH_SERVER"
	childCertEnv = "FERRY_BENCH_CERT" // PEM certificate file
	childKeyEnv  = "FERRY_BENCH_KEY"  // PEM key file
	bodyLen      = 256
)

var responseBody = bytes.Repeat([]byte("f"), bodyLen)

// isChild reports whether this process is the benchmark server.
func isChild() bool { return os.Getenv(childEnv) == "1" }

// serveChild serves HTTP/1.1 in cleartext and HTTP/1.1 + HTTP/2 over TLS
// on two loopback ports, prints "h1addr tlsaddr" on stdout, and exits when
// stdin is closed (the parent exited or is done).
func serveChild() error {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(bodyLen))
		w.Write(responseBody)
	})
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	secure, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s1 := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s2 := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go s1.Serve(plain)
	go s2.ServeTLS(secure, os.Getenv(childCertEnv), os.Getenv(childKeyEnv))
	fmt.Printf("%s %s\n", plain.Addr(), secure.Addr())
	io.Copy(io.Discard, os.Stdin)
	return nil
}
