package h2conn

import (
	"github.com/ferryhttp/ferry/internal/idlepool"
)

// Conn is what the pool expects of a shared connection.
var (
	_ idlepool.SharedConn   = (*Conn)(nil)
	_ idlepool.IdleReporter = (*Conn)(nil)
	_ idlepool.IdleCloser   = (*Conn)(nil)
)
