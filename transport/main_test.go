package transport

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		runBenchServer()
		return
	}
	goleak.VerifyTestMain(m)
}
