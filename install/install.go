// Package install adopts ferry for a whole program when imported for its
// side effect:
//
//	import _ "github.com/ferryhttp/ferry/install"
//
// Its init function calls transport.Install: http.DefaultTransport, and so
// http.Get, http.DefaultClient and every http.Client with a nil Transport,
// then sends requests with a ferry Transport built from its settings,
// while http.DefaultTransport stays an *http.Transport: code doing
// http.DefaultTransport.(*http.Transport).Clone() keeps working, and a
// setting the program changes on it later is obeyed (those requests go to
// net/http). transport.Install's documentation says what stays on
// net/http.
//
// The installed Transport is transport.Installed(), for its Stats:
//
//	expvar.Publish("ferry", transport.Installed().StatsVar())
//
// Packages are initialised in dependency order. An init function that
// runs before this package's and sends a request through
// http.DefaultTransport uses net/http, and makes Install fall back to
// http.DefaultClient alone (the transport's https scheme is then taken by
// net/http's HTTP/2). In the usual case, nothing in an init function
// sends a request, and every request from main on that reaches
// http.DefaultTransport uses ferry.
package install

import "github.com/ferryhttp/ferry/transport"

func init() { transport.Install() }
