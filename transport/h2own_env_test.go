package transport

import "os"

// FERRY_H2_OWN=1 runs the package's tests on h2conn's own HTTP/2
// connection instead of x/net's.
func init() {
	if os.Getenv("FERRY_H2_OWN") == "1" {
		h2Own = true
	}
}
