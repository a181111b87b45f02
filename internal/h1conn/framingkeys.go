package h1conn

import (
	"math/bits"
	"net/http"
)

// framingKeys records which of the header keys read after parsing (to frame
// the body and decide the connection's fate) a response head contains. The
// parser notes them as it stores each key, for a few byte compares, so the
// code after it looks up only the keys that are there: a typical response
// carries one of the six (Content-Length), and each absent key would cost a
// map lookup (about 25 ns) on every response.
//
// A bit is set when the key was stored in the map; the map may lose the key
// later (framing deletes some), so a set bit means "look it up", while a
// clear bit means the key is certainly absent. Code that adds one of these
// keys to a header must therefore also set its bit.
type framingKeys uint8

const (
	hasPragma framingKeys = 1 << iota
	hasConnection
	hasTransferEncoding
	hasContentLength
	hasTrailer
	hasContentEncoding

	// anyFramingKey makes every lookup happen: for headers that did not
	// come from the parser.
	anyFramingKey framingKeys = 1<<iota - 1
)

// framingKeyNames holds each bit's key, in bit order.
var framingKeyNames = [...]string{
	"Pragma", "Connection", "Transfer-Encoding", "Content-Length", "Trailer", "Content-Encoding",
}

// framingKeyByLen maps a key length to the index of the framing key of
// that length in framingKeyNames, or -1: the six lengths differ, so a key
// is compared with at most one name.
var framingKeyByLen = func() (t [32]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, name := range framingKeyNames {
		if t[len(name)] != -1 {
			panic("transport: two framing keys of one length: " + name)
		}
		t[len(name)] = int8(i)
	}
	return t
}()

// framingKeyOf returns the bit of the canonical key k, or 0. Keys are
// compared exactly, as the map lookups they replace are.
func framingKeyOf(k string) framingKeys {
	if len(k) >= len(framingKeyByLen) {
		return 0
	}
	if i := framingKeyByLen[len(k)]; i >= 0 && k == framingKeyNames[i] {
		return 1 << i
	}
	return 0
}

// lookup returns the values of the header key whose bit is key (one bit),
// without a map lookup when f says the key is absent.
func (f framingKeys) lookup(h http.Header, key framingKeys) ([]string, bool) {
	if f&key == 0 {
		return nil, false
	}
	v, ok := h[framingKeyNames[bits.TrailingZeros8(uint8(key))]]
	return v, ok
}
