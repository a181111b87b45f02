// Package benchchild runs a benchmark's server in a child process (the test
// binary re-executed with an environment variable set), so that what the
// parent measures (CPU, context switches, syscalls; see internal/proccost)
// is the client's alone.
//
// The parent calls Start once; the child, seeing its variable in TestMain or
// init, calls Announce and then serves (Serve for a plain accept loop). The
// child prints its address as the first line of its stdout ("ERR ..." when
// it could not start) and exits when its stdin reaches EOF, which happens
// when the parent exits or calls the stop function.
package benchchild

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// mu guards children: the started children, kept reachable so that the
// garbage collector never finalizes (closes) a stdin pipe the caller
// dropped, which would end the child in the middle of a benchmark.
var (
	mu       sync.Mutex
	children = map[*exec.Cmd]io.WriteCloser{}
)

// Start re-executes this test binary (running no tests) with env=1 set and
// returns the address the child announced and a function that stops it. A
// child that is never stopped runs until this process exits. After
// PinApart the child runs on the CPU PinApart set aside for it.
func Start(env string) (addr string, stop func(), err error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := startPinned(cmd.Start); err != nil {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		return "", nil, err
	}
	mu.Lock()
	children[cmd] = stdin
	mu.Unlock()
	stop = func() {
		mu.Lock()
		delete(children, cmd)
		mu.Unlock()
		stdin.Close()
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil || line == "" || strings.HasPrefix(line, "ERR") {
		stop()
		return "", nil, fmt.Errorf("benchmark server child: %q %v", line, err)
	}
	return line, stop, nil
}

// Fail reports a child that could not start, on the line Start reads, and
// exits.
func Fail(err error) {
	fmt.Println("ERR", err)
	os.Exit(1)
}

// Announce prints ln's address for the parent and makes the process exit
// when its stdin reaches EOF.
func Announce(ln net.Listener) {
	fmt.Println(ln.Addr().String())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
}

// Serve announces ln and runs serveConn for every connection it accepts,
// each on its own goroutine; it does not return.
func Serve(ln net.Listener, serveConn func(net.Conn)) {
	Announce(ln)
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		go serveConn(c)
	}
}

// ServeCannedHTTP1 is a minimal HTTP/1.1 keep-alive responder: it answers
// every request head read from c (benchmark requests carry no body) with
// resp, flushing when no further request is already buffered, and closes c
// when the peer goes away.
func ServeCannedHTTP1(c net.Conn, resp []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	bw := bufio.NewWriterSize(c, 16<<10)
	for {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
		}
		bw.Write(resp)
		if br.Buffered() == 0 && bw.Flush() != nil {
			return
		}
	}
}
