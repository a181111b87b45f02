package idlepool

import (
	"testing"
	"time"
)

// TestUsableAfterRecoveredMisuse: an Unlock of an unlocked
// shardLock panics (sync.Mutex's fatal error cannot be recovered at all);
// if a caller recovers, the lock must still work. Today the failed Unlock
// leaves -1 in the state word (all flag bits and a negative sleeper count),
// so every later Lock sleeps forever.
func TestUsableAfterRecoveredMisuse(t *testing.T) {
	var l shardLock
	l.init()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Unlock of an unlocked lock did not panic")
			}
		}()
		l.Unlock()
	}()
	if got := l.state.Load(); got != 0 {
		t.Errorf("state %#x after the failed Unlock, want 0", got)
	}
	locked := make(chan struct{})
	go func() {
		l.Lock()
		l.Unlock()
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("Lock after a recovered misuse did not return")
	}
}
