// Command ferrycheck reports the code, in a module and its dependencies,
// that needs http.DefaultTransport (or another http.RoundTripper) to be an
// *http.Transport, and says for each place which way of adopting ferry
// keeps it working:
//
//	go run github.com/ferryhttp/ferry/cmd/ferrycheck@latest ./...
//
// It finds type assertions and type switches to *http.Transport of
// http.DefaultTransport or of an http.RoundTripper value, and the fields
// read or written through the *http.Transport they give. A dependency's
// findings are reported at the import that brings it in, with the
// dependency's file and line; to have them reported in place, name the
// dependencies' packages too (the pattern "all" names every package the
// module builds).
//
// transport.Install keeps http.DefaultTransport an *http.Transport, so
// every assertion of it holds; transport.InstallDefaultTransport replaces
// it, so they fail (or panic when unchecked). An http.RoundTripper that is
// a ferry Transport (transport.New, transport.From) fails the assertion
// whichever way ferry was adopted.
//
// It is a golang.org/x/tools/go/analysis analyzer and also runs under go
// vet:
//
//	go build -o ferrycheck github.com/ferryhttp/ferry/cmd/ferrycheck
//	go vet -vettool=$(pwd)/ferrycheck ./...
//
// The exit status is 3 when something was reported, as with other
// analysis drivers.
package main

import "golang.org/x/tools/go/analysis/singlechecker"

func main() { singlechecker.Main(Analyzer) }
