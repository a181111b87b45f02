// want package:"2 places need \\*http.Transport"

// Package lib is a dependency that configures http.DefaultTransport.
package lib

import "net/http"

// Tune sets the idle pool size of the default transport.
func Tune() {
	t := http.DefaultTransport.(*http.Transport) // want `^http.DefaultTransport asserted to \*http.Transport: holds with transport.Install \(safe\); panics after transport.InstallDefaultTransport$`
	t.MaxIdleConnsPerHost = 16                   // want `^writes field MaxIdleConnsPerHost of the \*http.Transport from the type assertion at lib.go:10: works with transport.Install`
}
