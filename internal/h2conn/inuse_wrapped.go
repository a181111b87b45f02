//go:build go1.27 && !http2legacy

package h2conn

import "golang.org/x/net/http2"

// markInUse does nothing in wrapped mode (Go 1.27 and later): there the
// "unused connection" timer belongs to net/http's client, which x/net's
// pool path cannot reach (inuse_legacy.go explains the legacy case).
func markInUse(*http2.Transport, bool) {}
