package server

import (
	"encoding/binary"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenBacklogIsSystemLimit checks that the TCP listener's accept
// backlog is the system's limit (net.core.somaxconn): Go's net package reads
// /proc/sys/net/core/somaxconn and passes it to listen(2); the kernel
// reports the backlog in effect as the listener's inet_diag wqueue.
func TestListenBacklogIsSystemLimit(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Skipf("cannot read the system limit: %v", err)
	}
	somaxconn, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("parsing somaxconn %q: %v", raw, err)
	}
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	port := st.srv.Addr().(*net.TCPAddr).Port
	backlog, err := listenBacklog(unix.AF_INET, port)
	if err != nil {
		t.Skipf("sock_diag unavailable: %v", err)
	}
	if backlog != uint32(somaxconn) {
		t.Fatalf("listener backlog %d, want somaxconn %d", backlog, somaxconn)
	}
}

// listenBacklog asks NETLINK_SOCK_DIAG for the listening TCP sockets of
// family and returns the maximum backlog of the one bound to port.
func listenBacklog(family uint8, port int) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)

	// nlmsghdr (16 bytes) + inet_diag_req_v2 (56 bytes).
	req := make([]byte, 16+56)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1) // sequence
	req[16] = family
	req[17] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[20:], 1<<10) // states: TCP_LISTEN only
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return 0, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return 0, os.ErrNotExist
			case unix.NLMSG_ERROR:
				return 0, unix.EINVAL
			}
			// inet_diag_msg: family, state, timer, retrans (4 bytes), then
			// inet_diag_sockid whose first field is the big-endian source
			// port; rqueue at 56, wqueue (max backlog for a listener) at 60.
			d := m.Data
			if len(d) < 64 {
				continue
			}
			if int(binary.BigEndian.Uint16(d[4:])) == port {
				return binary.NativeEndian.Uint32(d[60:]), nil
			}
		}
	}
}
