package altsvc_test

import (
	"fmt"
	"log"

	"github.com/ferryhttp/ferry/altsvc"
)

// A Cache learns alternatives from Alt-Svc headers, answers which one a
// request may use, and hides one that failed until its backoff ends.
func ExampleCache() {
	c := altsvc.New(altsvc.Options{})
	origin, err := altsvc.ParseOrigin("https://Example.COM")
	if err != nil {
		log.Fatal(err)
	}
	// The Alt-Svc header of a response from that origin (Age 0).
	if err := c.UpdateFromResponse(origin, []string{`h3=":8443"; ma=3600`}, 0); err != nil {
		log.Fatal(err)
	}

	alt, ok := c.Usable(origin, "h3")
	fmt.Println(origin, ok, alt.Protocol, alt.Host, alt.Port)

	c.MarkBroken(origin, alt) // the QUIC handshake failed
	_, ok = c.Usable(origin, "h3")
	fmt.Println("usable after a failure:", ok)

	c.MarkWorking(origin, alt)
	_, ok = c.Usable(origin, "h3")
	fmt.Println("usable once it worked again:", ok)
	// Output:
	// https://example.com:443 true h3 example.com 8443
	// usable after a failure: false
	// usable once it worked again: true
}
