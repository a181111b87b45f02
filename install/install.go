// Package install adopts ferry for a whole program when imported for its
// side effect:
//
//	import _ "github.com/ferryhttp/ferry/install"
//
// Its init function calls transport.Install: http.DefaultClient (and so
// http.Get, http.Head, http.Post, http.PostForm and DefaultClient.Do) then
// sends requests with a ferry Transport built from http.DefaultTransport's
// settings, while http.DefaultTransport stays an *http.Transport, so code
// doing http.DefaultTransport.(*http.Transport).Clone() keeps working.
// transport.Install's documentation says what stays on net/http and when
// transport.InstallDefaultTransport is the better choice.
//
// The installed Transport is transport.Installed(), for its Stats:
//
//	expvar.Publish("ferry", transport.Installed().StatsVar())
//
// Packages are initialised in dependency order, so an init function that
// runs before this package's and sends requests with http.DefaultClient
// uses net/http; everything from main on uses ferry.
package install

import "github.com/ferryhttp/ferry/transport"

func init() { transport.Install() }
