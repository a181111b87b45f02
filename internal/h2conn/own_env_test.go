package h2conn

import "os"

// FERRY_H2_OWN=1 runs every test of the package on ferry's own HTTP/2
// connection (Config.Own) instead of x/net's.
func init() {
	if os.Getenv("FERRY_H2_OWN") == "1" {
		ownDefault = true
	}
}
