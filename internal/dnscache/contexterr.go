package dnscache

import "context"

// NetContextError returns the error the net package reports when a
// context ends a lookup or a dial: for context.DeadlineExceeded a net.Error
// with Timeout() true reading "i/o timeout", for context.Canceled one
// reading "operation was canceled". errors.Is(result, err) holds, so callers
// testing for the context's error still match; only the text follows net
// ("lookup example.com: i/o timeout", "dial tcp 10.0.0.1:443: i/o
// timeout"), which logs and tests written against net/http look for. Any
// other error is returned as is.
func NetContextError(err error) error {
	switch err {
	case context.DeadlineExceeded:
		return contextTimeoutError{}
	case context.Canceled:
		return contextCanceledError{}
	}
	return err
}

// contextTimeoutError is net's error for a context deadline.
type contextTimeoutError struct{}

func (contextTimeoutError) Error() string        { return "i/o timeout" }
func (contextTimeoutError) Timeout() bool        { return true }
func (contextTimeoutError) Temporary() bool      { return true }
func (contextTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// contextCanceledError is net's error for a cancelled context.
type contextCanceledError struct{}

func (contextCanceledError) Error() string        { return "operation was canceled" }
func (contextCanceledError) Is(target error) bool { return target == context.Canceled }
