package h1conn

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Chunk headers of the chunked transfer coding (RFC 9112 section 7.1), with
// net/http's limits: a chunk-size line ending in CRLF (a bare LF is not
// accepted there, RFC 9112 errata 7633) with no other CR, of less than
// 4 KiB, at most 16 hex digits, extensions ignored, strict CRLF after the
// data, and a cap on the bytes spent on framing rather than data so a
// server cannot make the client churn through endless tiny chunks with long
// extensions. Unlike net/http, white space before the ';' of an extension
// (BWS, which RFC 9112 allows) is accepted.

const maxChunkLineLength = 4096

var (
	errChunkLineTooLong = errors.New("header line too long")
	errMalformedChunked = errors.New("malformed chunked encoding")
	errChunkTooLarge    = errors.New("http chunk length too large")
	errChunkOverhead    = errors.New("chunked encoding contains too much non-data")
	errChunkBareLF      = errors.New("chunked line ends with bare LF")
	errChunkInnerCR     = errors.New("invalid CR in chunked line")
)

type chunkState struct {
	started bool  // a chunk's data has been read (CRLF expected before the next header)
	excess  int64 // framing bytes not yet paid for by data
}

// readHeader reads one chunk-size line and returns the size.
func (c *chunkState) readHeader(br *bufio.Reader) (int64, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		switch err {
		case bufio.ErrBufferFull:
			err = errChunkLineTooLong
		case io.EOF:
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	if i := bytes.IndexByte(line, '\r'); i < 0 {
		return 0, errChunkBareLF
	} else if i != len(line)-2 {
		return 0, errChunkInnerCR
	}
	line = line[:len(line)-2]
	if len(line) >= maxChunkLineLength {
		return 0, errChunkLineTooLong
	}
	// The line and the CRLF after the chunk's data are framing.
	c.excess += int64(len(line)) + 2
	line = bytes.TrimRight(line, " \t")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = bytes.TrimRight(line[:i], " \t")
	}
	size, err := parseHex(line)
	if err != nil {
		return 0, err
	}
	c.excess -= 16 + 2*size
	if c.excess < 0 {
		c.excess = 0
	}
	if c.excess > 16<<10 {
		return 0, errChunkOverhead
	}
	return size, nil
}

func parseHex(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, errors.New("empty hex number for chunk length")
	}
	if len(b) > 16 {
		return 0, errChunkTooLarge
	}
	var n uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, errors.New("invalid byte in chunk length")
		}
		n = n<<4 | uint64(c)
	}
	if n > 1<<63-1 {
		return 0, errChunkTooLarge
	}
	return int64(n), nil
}

// readChunkCRLF consumes the CRLF that ends a chunk's data.
func readChunkCRLF(br *bufio.Reader) error {
	b, err := br.Peek(2)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if b[0] != '\r' || b[1] != '\n' {
		return errMalformedChunked
	}
	br.Discard(2)
	return nil
}

// chunkHeaderBuffered reports whether a whole chunk-size line is buffered.
func chunkHeaderBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := br.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// readFieldBlock reads header lines (a trailer section) through the blank
// line into one string, bounded by limit. An empty first line is an empty
// trailer section.
func readFieldBlock(br *bufio.Reader, limit int64) (string, error) {
	block, err := readLineBlock(br, limit, true)
	if err == errLineBlockTooLong {
		err = errTrailerTooLong
	}
	return block, err
}

// errTrailerTooLong is net/http's wording for a trailer section over the
// response header limit.
var errTrailerTooLong = errors.New("http: suspiciously long trailer after chunked body")
