package transport

import (
	"fmt"
	"os"
	"testing"

	"github.com/ferryhttp/ferry/internal/benchchild"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		runBenchServer()
		return
	}
	if note, err := benchchild.PinApart(); err != nil {
		fmt.Fprintln(os.Stderr, "transport benchmarks: not pinned:", err)
	} else if note != "" {
		fmt.Fprintln(os.Stderr, "transport benchmarks:", note)
	}
	goleak.VerifyTestMain(m)
}
