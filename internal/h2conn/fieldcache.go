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
// its size is set. Both advance the cache's generation, as does anything
// else the encoder writes that is not a bare index, and an entry of an
// older generation is never used: an entry is used only while everything
// written since it was cached was a bare index, which leaves the table as
// it was. So a block built from the cache is byte for byte what the
// encoder would have written.

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

// newFieldCache makes an encoder writing header blocks into out, whose
// dynamic table never exceeds tableLimit, and its cache.
func newFieldCache(out *bytes.Buffer, tableLimit uint32) fieldCache {
	enc := hpack.NewEncoder(out)
	enc.SetMaxDynamicTableSizeLimit(tableLimit)
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
	if len(wrote) > 0 && wrote[0]&0x80 != 0 {
		// An indexed field (RFC 7541, 6.1): the table is unchanged.
		if len(wrote) <= len(s.enc) {
			*s = cachedField{name: name, value: value, gen: fc.gen, n: uint8(len(wrote))}
			copy(s.enc[:], wrote)
		}
		return
	}
	// A literal, added to the table or not (6.2), possibly after a table
	// size update (6.3): the table may have changed.
	fc.gen++
}

// setMaxDynamicTableSize changes the encoder's table size (the peer's
// SETTINGS_HEADER_TABLE_SIZE).
func (fc *fieldCache) setMaxDynamicTableSize(n uint32) {
	fc.enc.SetMaxDynamicTableSize(n)
	fc.gen++
}
