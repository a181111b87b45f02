// Package h1conn is ferry's HTTP/1.1 client connection: it writes a
// request on a net.Conn and reads its response, byte for byte as net/http's
// Transport does, one request at a time.
//
// # Contract
//
// The transport plans a request once (Plan fills an Outgoing: the body's
// framing, the headers the transport adds; HTTP/2 and HTTP/3 read the same
// plan), then for each attempt on a Conn calls StartRequest (binding the
// request's context, its legacy Cancel channel and the owner's
// CancelRequest registration) and RoundTrip, the one exchange entry point.
// RoundTrip returns the response with a *Body (or http.NoBody, or a
// read-write body after a protocol switch), or an error classified for the
// retry decision (Retryable; UserError strips the classification).
//
// A Conn lives inside its owner, which implements Owner: the connection
// hands itself back (PutIdle) when a response ends cleanly and the
// connection may carry another request, tells the owner when it closes
// (Closed, with whether its pool slot is to be freed) and when a request's
// CancelRequest registration starts and ends. Settings are read from a
// Config shared by the owner's connections. Nothing in this package
// imports the transport.
//
// The body writer: a request body not known to be small and in memory, or
// one the socket's send buffer cannot certainly take with its head
// (inlinebound.go), is written by a goroutine of its own while the
// response head is read, so a server that answers before reading it all
// cannot block the exchange. The response's end waits for that writer (at
// most 50ms, as net/http) before the connection is reused.
//
// Between requests: FitForReuse tells whether a connection taken from the
// pool may carry a request (it received nothing while idle; alive.go,
// idlewatch.go). A body closed before its end is drained on Go 1.27 builds
// (drain.go), as net/http 1.27 does; GiveBack returns a connection a
// cancelled request obtained but will not use.
//
// Errors keep net/http's texts: ErrRequestCanceled, ErrHeaderTimeout,
// "net/http: HTTP/1.x transport connection broken: ...", the header-limit,
// chunked-encoding and body-length errors.
package h1conn
