package idlepool_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/ferryhttp/ferry/internal/idlepool"
)

// Example shows the request path of a transport: take an idle connection or
// the permission to dial one, use it, and give it back.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()

	pool := idlepool.New[string, net.Conn](idlepool.Config{IdleTimeout: time.Minute, MaxConnsPerKey: 4})
	defer pool.Close()
	key := ln.Addr().String()
	for i := range 3 {
		conn, _, reused, err := pool.Acquire(context.Background(), key)
		if err != nil {
			fmt.Println(err)
			return
		}
		if !reused {
			if conn, err = net.Dial("tcp", key); err != nil {
				pool.Release(key) // the slot Acquire reserved
				fmt.Println(err)
				return
			}
		}
		fmt.Printf("request %d: reused=%v\n", i, reused)
		pool.Put(key, conn)
	}
	fmt.Printf("%+v\n", pool.Stats().Hits)
	// Output:
	// request 0: reused=false
	// request 1: reused=true
	// request 2: reused=true
	// 2
}
