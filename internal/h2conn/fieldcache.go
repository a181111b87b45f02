package h2conn

import (
	"bytes"

	"golang.org/x/net/http2/hpack"
)

// Encoding header fields for HEADERS frames. Most fields a client sends
// repeat on every request of a connection (":method", ":scheme",
// ":authority", the default user-agent, accept-encoding) and, once in the
// HPACK dynamic table, the encoder emits each as one index: the same bytes
// for as long as the table is unchanged. Finding that index costs the
// encoder several hashed map lookups per field; fieldCache remembers the
// bytes instead, and the encoder is asked only for fields it has not seen
// as a bare index since the table last changed.
//
// The table changes only when the encoder adds a field (a literal with
// incremental indexing, which may also evict the oldest entries) or when
// its size is set; both advance the cache's generation, and an entry of an
// older generation is never used. So a block built from the cache is
// byte for byte what the encoder would have written.

// fieldCacheSlots is the number of cached fields (a power of two).
const fieldCacheSlots = 16

// cachedField is one field the encoder last wrote as a bare index.
type cachedField struct {
	name, value string
	gen         uint64 // fieldCache.gen when it was written
	n           uint8  // bytes used in enc
	enc         [4]byte
}

// fieldCache is the write side's HPACK encoder and the fields it wrote as
// bare indexes; guarded by clientConn.wmu, like the encoder.
type fieldCache struct {
	enc  *hpack.Encoder
	out  *bytes.Buffer // where enc writes
	gen  uint64        // advanced whenever the encoder's dynamic table may change
	slot [fieldCacheSlots]cachedField
}

// newFieldCache makes the cache around an encoder that writes to out.
func newFieldCache(enc *hpack.Encoder, out *bytes.Buffer) fieldCache {
	return fieldCache{enc: enc, out: out, gen: 1}
}

// slotFor picks name's slot from its length and second byte, without
// hashing the whole name: the pseudo-headers, user-agent, accept-encoding
// and content-length each get a slot of their own
// (TestFieldCacheServesRepeatedFieldsWithoutTheEncoder).
func slotFor(name string) int {
	h := len(name) * 7
	if len(name) > 1 {
		h += int(name[1])
	}
	return h & (fieldCacheSlots - 1)
}

// writeField appends one field to the block being built.
func (fc *fieldCache) writeField(name, value string) {
	s := &fc.slot[slotFor(name)]
	if s.gen == fc.gen && s.name == name && s.value == value {
		fc.out.Write(s.enc[:s.n])
		return
	}
	before := fc.out.Len()
	fc.enc.WriteField(hpack.HeaderField{Name: name, Value: value})
	wrote := fc.out.Bytes()[before:]
	switch {
	case len(wrote) == 0:
	case wrote[0]&0x80 != 0:
		// An indexed field (RFC 7541, 6.1): the table is unchanged.
		if len(wrote) <= len(s.enc) {
			*s = cachedField{name: name, value: value, gen: fc.gen, n: uint8(len(wrote))}
			copy(s.enc[:], wrote)
		}
	case wrote[0]&0xc0 == 0x40:
		// A literal added to the table (6.2.1): the table changed.
		fc.gen++
	}
	// Otherwise a literal not added to the table (6.2.2, 6.2.3), or a
	// table size update ahead of the field (6.3), whose change of the
	// table setMaxDynamicTableSize has counted.
}

// setMaxDynamicTableSize changes the encoder's table size (the peer's
// SETTINGS_HEADER_TABLE_SIZE).
func (fc *fieldCache) setMaxDynamicTableSize(n uint32) {
	fc.enc.SetMaxDynamicTableSize(n)
	fc.gen++
}
