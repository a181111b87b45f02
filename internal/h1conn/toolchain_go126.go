//go:build !go1.27

package h1conn

// netHTTP127 is false before Go 1.27: see toolchain_go127.go for the
// behaviours it switches.
const netHTTP127 = false
