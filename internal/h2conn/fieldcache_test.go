package h2conn

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// fieldPool is what the random header lists below are drawn from: fields
// that repeat (and so get indexed), fields that share a name with
// different values (literals that grow the table and evict), names that
// share a cache slot, and a value too large for the table (never added).
var fieldPool = []hpack.HeaderField{
	{Name: ":method", Value: "GET"},
	{Name: ":method", Value: "POST"},
	{Name: ":scheme", Value: "https"},
	{Name: ":authority", Value: "example.com"},
	{Name: ":authority", Value: "api.example.com:8443"},
	{Name: ":path", Value: "/"},
	{Name: ":path", Value: "/v1/items?page=2"},
	{Name: "user-agent", Value: defaultUserAgent},
	{Name: "accept-encoding", Value: "gzip"},
	{Name: "content-length", Value: "42"},
	{Name: "x-request-id", Value: "0123456789"},
	{Name: "x-request-id", Value: "9876543210"},
	{Name: "cookie", Value: "a=b"},
	{Name: "x-big", Value: strings.Repeat("v", 5000)},
}

// TestFieldCacheWritesWhatTheEncoderWrites feeds random header lists (and
// changes of the table size between them) to a fieldCache and to a plain
// hpack.Encoder side by side: every block must be the same bytes, and a
// decoder must read back the fields sent. A cached index used after the
// table changed would differ from the plain encoder's output.
func TestFieldCacheWritesWhatTheEncoderWrites(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			var cachedBuf, plainBuf bytes.Buffer
			fc := newFieldCache(&cachedBuf, 4096)
			plain := hpack.NewEncoder(&plainBuf)
			plain.SetMaxDynamicTableSizeLimit(4096)
			var got []hpack.HeaderField
			dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f) })

			for block := range 300 {
				if rng.IntN(20) == 0 {
					size := uint32(rng.IntN(4097))
					fc.setMaxDynamicTableSize(size)
					plain.SetMaxDynamicTableSize(size)
				}
				cachedBuf.Reset()
				plainBuf.Reset()
				var sent []hpack.HeaderField
				for range 1 + rng.IntN(8) {
					f := fieldPool[rng.IntN(len(fieldPool))]
					sent = append(sent, f)
					fc.writeField(f.Name, f.Value)
					plain.WriteField(f)
				}
				if !bytes.Equal(cachedBuf.Bytes(), plainBuf.Bytes()) {
					t.Fatalf("block %d: cached % x, encoder % x", block, cachedBuf.Bytes(), plainBuf.Bytes())
				}
				got = got[:0]
				if _, err := dec.Write(cachedBuf.Bytes()); err != nil {
					t.Fatalf("block %d: decode: %v", block, err)
				}
				if err := dec.Close(); err != nil {
					t.Fatalf("block %d: decode: %v", block, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(sent) {
					t.Fatalf("block %d: decoded %v, sent %v", block, got, sent)
				}
			}
		})
	}
}

// TestFieldCacheServesRepeatedFieldsWithoutTheEncoder pins that the cache
// is used: once a request's fields are in the table, the same list again
// is written from the cache (the encoder, swapped for one writing
// elsewhere, sees none of it), and the bytes are the indexes it wrote the
// second time.
func TestFieldCacheServesRepeatedFieldsWithoutTheEncoder(t *testing.T) {
	var buf bytes.Buffer
	fc := newFieldCache(&buf, 4096)
	fields := fieldPool[:10:10]
	writeAll := func() []byte {
		buf.Reset()
		for _, f := range []int{0, 2, 3, 5, 7, 8, 9} {
			fc.writeField(fields[f].Name, fields[f].Value)
		}
		return bytes.Clone(buf.Bytes())
	}
	writeAll()           // adds :authority, user-agent... to the table
	second := writeAll() // every field an index now, remembered
	var elsewhere bytes.Buffer
	fc.enc = hpack.NewEncoder(&elsewhere)
	third := writeAll()
	if elsewhere.Len() != 0 {
		t.Fatalf("the encoder wrote % x for fields the cache holds", elsewhere.Bytes())
	}
	if !bytes.Equal(second, third) || len(third) != 7 {
		t.Fatalf("from the cache % x, from the encoder % x; want one index byte per field", third, second)
	}
}

// BenchmarkRequestFieldEncoding compares a small GET's header list written
// through the fieldCache with the same list given to a plain hpack
// encoder, on a table that already holds every field.
func BenchmarkRequestFieldEncoding(b *testing.B) {
	fields := []hpack.HeaderField{
		{Name: ":authority", Value: "127.0.0.1:8443"},
		{Name: ":method", Value: "GET"},
		{Name: ":path", Value: "/bench"},
		{Name: ":scheme", Value: "https"},
		{Name: "accept-encoding", Value: "gzip"},
		{Name: "user-agent", Value: defaultUserAgent},
	}
	b.Run("cache", func(b *testing.B) {
		var buf bytes.Buffer
		fc := newFieldCache(&buf, 4096)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			for _, f := range fields {
				fc.writeField(f.Name, f.Value)
			}
		}
	})
	b.Run("encoder", func(b *testing.B) {
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			for _, f := range fields {
				enc.WriteField(f)
			}
		}
	})
}
