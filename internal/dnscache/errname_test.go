package dnscache

import (
	"errors"
	"net"
	"testing"

	"github.com/ferryhttp/ferry/internal/dnscache/dnstest"
)

// TestFailureNamesCallersSpelling: a failure names the host as each caller
// spelled it, as net.Resolver's does, also when the failure is cached
// under the lower-cased name from another spelling.
func TestFailureNamesCallersSpelling(t *testing.T) {
	srv := dnstest.Start(t)
	c := newTestCache(t, srv, newFakeClock(), nil)
	var first error
	for _, host := range []string{"NX.Ferry.Test", "nx.FERRY.test", "nx.ferry.test"} {
		_, want := srv.Resolver().LookupNetIP(t.Context(), "ip", host)
		_, got := c.LookupNetIP(t.Context(), host)
		var de *net.DNSError
		if got == nil || want == nil || got.Error() != want.Error() || !errors.As(got, &de) || !de.IsNotFound {
			t.Fatalf("%s: ferry %v, net %v", host, got, want)
		}
		if first == nil {
			first = got
		}
	}
	if want := "NX.Ferry.Test"; first.(*net.DNSError).Name != want {
		t.Fatalf("first error was modified: names %q", first.(*net.DNSError).Name)
	}
	if q := srv.Count("nx.ferry.test", "A"); q != 3+1 {
		// three net.Resolver lookups, one for the cache
		t.Fatalf("%d A queries, want 4: the cache should have asked once", q)
	}
}
