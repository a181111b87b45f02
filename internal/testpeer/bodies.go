package testpeer

import "io"

// TrailerBody is a request body that calls Set when R reaches EOF, as a
// streaming client fills in the trailers it announced (Request.Trailer)
// once the body is written. Close does nothing.
type TrailerBody struct {
	R   io.Reader
	Set func()
}

func (b *TrailerBody) Read(p []byte) (int, error) {
	n, err := b.R.Read(p)
	if err == io.EOF {
		b.Set()
	}
	return n, err
}

func (b *TrailerBody) Close() error { return nil }
