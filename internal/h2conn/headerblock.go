package h2conn

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Decoding the response header blocks of the own connection. The Framer
// hands back HEADERS and CONTINUATION frames as they are (its
// ReadMetaHeaders is not used: that allocates a frame, a field slice
// grown field by field and a closure per block); the frame reader
// decodes them here with one HPACK decoder whose emit function, field
// slice and MetaHeadersFrame are the connection's and reused from block
// to block. The rules are those x/net's Framer applies to a block: the
// list size limit this side announced (a block over it is Truncated, one
// far over it or followed by CONTINUATIONs after a bad field is a
// connection error), valid field names and values, pseudo fields first
// and well formed (a stream error otherwise), and HPACK errors as
// COMPRESSION_ERROR.

// headerBlock is the header block being decoded; the frame reader's only.
type headerBlock struct {
	// mh is handed to the frame's handler; its Fields are valid until the
	// next block is read.
	mh http2.MetaHeadersFrame
	// remain and trailerRemain are the list bytes still allowed (the
	// "trailer" field's names are counted apart, as x/net counts them).
	remain, trailerRemain uint32
	sawRegular            bool
	invalid               error // the first bad field: a stream error
}

// readFrame reads the next frame; a HEADERS frame comes back as a
// *http2.MetaHeadersFrame with its CONTINUATIONs read and its block
// decoded (or the stream or connection error the block is).
func (c *clientConn) readFrame() (http2.Frame, error) {
	f, err := c.fr.ReadFrame()
	if err != nil {
		return f, err
	}
	if hf, ok := f.(*http2.HeadersFrame); ok {
		return c.readHeaderBlock(hf)
	}
	return f, nil
}

// readHeaderBlock decodes hf's header block and those of the
// CONTINUATIONs that follow it.
func (c *clientConn) readHeaderBlock(hf *http2.HeadersFrame) (http2.Frame, error) {
	b := &c.hblock
	clear(b.mh.Fields) // drop the previous block's strings
	b.mh = http2.MetaHeadersFrame{HeadersFrame: hf, Fields: b.mh.Fields[:0]}
	b.remain, b.trailerRemain = c.maxHeaderList, c.maxHeaderList
	b.sawRegular, b.invalid = false, nil
	c.hdec.SetEmitEnabled(true)
	c.hdec.SetMaxStringLength(int(min(uint64(c.maxHeaderList), uint64(maxInt))))

	frag := hf.HeaderBlockFragment()
	ended := hf.HeadersEnded()
	continuations := 0
	for {
		// A fragment far larger than what may still be accepted is not
		// decoded at all, nor anything after a bad field.
		if int64(len(frag)) > 2*(int64(b.remain)+int64(b.trailerRemain)) || b.invalid != nil {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := c.hdec.Write(frag); err != nil {
			return nil, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf, ok := f.(*http2.ContinuationFrame) // the Framer checks the order
		if !ok {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if continuations++; continuations > c.maxContinuations() {
			// Empty or tiny CONTINUATIONs cost the reader a frame each
			// and never reach the size limit: a server that sends more
			// than a block of the largest allowed size needs is flooding.
			c.countErr("continuation_flood")
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := c.hdec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if b.invalid != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: b.invalid}
	}
	if err := checkPseudoFields(b.mh.PseudoFields()); err != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return &b.mh, nil
}

const maxInt = int(^uint(0) >> 1)

// maxContinuations is how many CONTINUATION frames one header block may
// take: enough for a block of the list size this side announced cut into
// 1 KiB fragments (servers cut at their frame size, 16 KiB or more), plus
// a margin.
func (c *clientConn) maxContinuations() int {
	return int(c.maxHeaderList/1024) + 64
}

// emitField is the HPACK decoder's emit function: it checks one decoded
// field and adds it to the block.
func (c *clientConn) emitField(hf hpack.HeaderField) {
	b := &c.hblock
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		// The value stays out of the error: it may be sensitive.
		b.invalid = fmt.Errorf("invalid header field value for %q", hf.Name)
	}
	if strings.HasPrefix(hf.Name, ":") {
		if b.sawRegular {
			b.invalid = errPseudoAfterRegular
		}
	} else {
		b.sawRegular = true
		if !validWireFieldName(hf.Name) {
			b.invalid = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if b.invalid != nil {
		c.hdec.SetEmitEnabled(false)
		return
	}
	remain := &b.remain
	size := hf.Size()
	if hf.Name == "trailer" {
		// Each named trailer counts as a field of its own.
		remain = &b.trailerRemain
		n := uint32(strings.Count(hf.Value, ",") + 1)
		size = uint32(len(hf.Value)) - n + 1 + n*hpack.HeaderField{}.Size()
	}
	if size > *remain {
		c.hdec.SetEmitEnabled(false)
		b.mh.Truncated = true
		b.remain, b.trailerRemain = 0, 0
		return
	}
	*remain -= size
	b.mh.Fields = append(b.mh.Fields, hf)
}

var (
	errPseudoAfterRegular = errors.New("pseudo header field after regular")
	errMixPseudoTypes     = errors.New("mix of request and response pseudo headers")
)

// validWireFieldName reports a field name as HTTP/2 carries it: a
// non-empty token without upper case.
func validWireFieldName(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !httpguts.IsTokenRune(rune(v[i])) || ('A' <= v[i] && v[i] <= 'Z') {
			return false
		}
	}
	return true
}

// checkPseudoFields checks a block's pseudo fields: only known names,
// none twice, not those of a request beside those of a response.
func checkPseudoFields(pf []hpack.HeaderField) error {
	var request, response bool
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return fmt.Errorf("invalid pseudo-header %q", hf.Name)
		}
		for _, prev := range pf[:i] {
			if prev.Name == hf.Name {
				return fmt.Errorf("duplicate pseudo-header %q", hf.Name)
			}
		}
	}
	if request && response {
		return errMixPseudoTypes
	}
	return nil
}
