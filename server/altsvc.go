package server

import (
	"fmt"
	"net/http"
	"time"
)

// altSvcValue formats the Alt-Svc field value advertising HTTP/3 on port
// with the given max-age, rounded down to whole seconds.
func altSvcValue(port int, maxAge time.Duration) string {
	return fmt.Sprintf(`h3=":%d"; ma=%d`, port, int64(maxAge/time.Second))
}

// altSvcHandler sets Alt-Svc on every TCP response while the Server
// advertises HTTP/3, then runs the user's handler (which may overwrite or
// delete the field).
type altSvcHandler struct {
	s    *Server
	next http.Handler
}

func (h *altSvcHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if v := h.s.altSvc.Load(); v != nil {
		// A fresh slice per response: a handler may modify what it finds.
		w.Header()["Alt-Svc"] = []string{*v}
	}
	h.next.ServeHTTP(w, r)
}
