package idlepool

import "time"

// DefaultMaxIdlePerKey is the per-key idle cap used when Config.MaxIdlePerKey
// is zero; it matches net/http's DefaultMaxIdleConnsPerHost.
const DefaultMaxIdlePerKey = 2

// Config sets the pool's limits. The zero Config keeps DefaultMaxIdlePerKey
// idle connections per key, has no global cap, never expires idle
// connections and does not limit connections per key.
type Config struct {
	// MaxIdlePerKey caps the idle exclusive connections kept per key. Zero
	// means DefaultMaxIdlePerKey; a negative value keeps nothing idle (every
	// Put that no waiter takes closes the connection).
	MaxIdlePerKey int

	// MaxIdle caps the idle exclusive connections over all keys; when a Put
	// goes over it the oldest idle connection, whatever its key, is closed.
	// Zero means no limit; a negative value keeps nothing idle.
	MaxIdle int

	// IdleTimeout is how long a connection may sit idle before the pool
	// closes it. Zero or negative means idle connections never expire. It can
	// be changed later with SetIdleTimeout.
	IdleTimeout time.Duration

	// MaxConnsPerKey limits the live connections of a key: being dialled, in
	// use, idle or shared. When the limit is reached Acquire waits. Zero or
	// negative means no limit.
	MaxConnsPerKey int

	// Clock returns the current time. Nil means time.Now; tests inject a
	// fake. The pool measures idle time as differences of its readings, so
	// with time.Now it uses the monotonic clock.
	Clock func() time.Time
}
