//go:build !unix

package transport

import (
	"net"
	"testing"
)

// refusingAddr returns a loopback address where nothing listens (a port
// freed by closing a listener; another socket may take it meanwhile, which
// the unix version rules out).
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
