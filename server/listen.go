package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/ferryhttp/ferry/internal/sockopt"
)

// bindAttempts is how many kernel-chosen TCP ports ListenTLS tries before
// giving up when the matching UDP port is taken each time.
const bindAttempts = 8

// listenConfig returns the net.ListenConfig for both sockets. Its Control
// sets SO_REUSEPORT before bind when asked. The backlog is not set here:
// Go's net package passes the system limit (/proc/sys/net/core/somaxconn on
// Linux) to listen(2) for every TCP listener.
func (s *Server) listenConfig() net.ListenConfig {
	var lc net.ListenConfig
	if s.ReusePort {
		lc.Control = sockopt.ListenControl([]sockopt.Setting{{Option: sockopt.ReusePort, Value: 1}})
	}
	return lc
}

// bind opens the TCP listener on addr and, when withUDP, a UDP socket on the
// same host and the port TCP got. If addr's port is 0 (the kernel chooses)
// and that UDP port is in use, it closes the TCP listener and tries again
// with another kernel-chosen port, up to bindAttempts times.
func (s *Server) bind(ctx context.Context, addr string, withUDP bool) (net.Listener, net.PacketConn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("server: address %q: %w", addr, err)
	}
	kernelPort := port == "0" || port == ""
	lc := s.listenConfig()
	var lastErr error
	for attempt := 0; attempt < bindAttempts; attempt++ {
		tcp, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("server: TCP listen: %w", err)
		}
		if !withUDP {
			return tcp, nil, nil
		}
		tcpPort := tcp.Addr().(*net.TCPAddr).Port
		udpAddr := net.JoinHostPort(host, strconv.Itoa(tcpPort))
		var udp net.PacketConn
		if s.listenUDP != nil {
			udp, err = s.listenUDP(ctx, lc, udpAddr)
		} else {
			udp, err = lc.ListenPacket(ctx, "udp", udpAddr)
		}
		if err == nil {
			return tcp, udp, nil
		}
		tcp.Close()
		lastErr = fmt.Errorf("server: UDP listen on %s for HTTP/3: %w", udpAddr, err)
		if !kernelPort || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, lastErr
		}
	}
	return nil, nil, fmt.Errorf("%w (after %d kernel-chosen ports)", lastErr, bindAttempts)
}
