package dialflight

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTableRemembersHTTP1: a second Join follows the flight in progress;
// once a key is known to speak HTTP/1, its dials are not coalesced (nor
// held behind one another); an HTTP/2 outcome makes it coalesce again and
// leaves no entry behind.
func TestTableRemembersHTTP1(t *testing.T) {
	var ft Table[string]
	k := "https a:443"
	f, leader := ft.Join(k)
	if f == nil || !leader {
		t.Fatal("first join must lead")
	}
	g, leader2 := ft.Join(k)
	if g != f || leader2 {
		t.Fatal("second join must follow the flight in progress")
	}
	ft.Finish(k, f, SpokeH1)
	<-f.Done()
	if f.Shared() {
		t.Fatal("an HTTP/1 outcome marked shared")
	}
	if h, _ := ft.Join(k); h != nil {
		t.Fatal("a key known to speak HTTP/1 must not coalesce")
	}
	ft.Record(k, Shared)
	h, leader3 := ft.Join(k)
	if h == nil || !leader3 {
		t.Fatal("after an HTTP/2 outcome the key coalesces again")
	}
	ft.Finish(k, h, Shared)
	if !h.Shared() {
		t.Fatal("shared outcome lost")
	}
	for i := range ft.shards {
		if len(ft.shards[i].m) != 0 {
			t.Fatal("entries left for a key that spoke HTTP/2")
		}
	}
}
