//go:build !ferry_nostats

package transport

// countStats turns the request-path counters of Stats on; building with
// the ferry_nostats tag turns them off (their code is then compiled out).
const countStats = true
