package server

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
)

// newErrorLogger returns the slog.Logger quic-go's HTTP/3 server logs to,
// writing through l, the http.Server's ErrorLog (the log package's standard
// logger when nil, as net/http does). quic-go logs per-connection failures at
// Debug; those are dropped, matching the level net/http reports at.
func newErrorLogger(l *log.Logger) *slog.Logger {
	return slog.New(&errorLogHandler{log: l})
}

// errorLogHandler is a slog.Handler that prints "http3: msg key=value ..."
// lines to a *log.Logger.
type errorLogHandler struct {
	log   *log.Logger // nil: log.Print
	attrs []slog.Attr
	group string
}

func (h *errorLogHandler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}

func (h *errorLogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("http3: ")
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		b.WriteByte(' ')
		if h.group != "" {
			b.WriteString(h.group)
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value.Any())
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	if h.log != nil {
		h.log.Print(b.String())
	} else {
		log.Print(b.String())
	}
	return nil
}

func (h *errorLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &n
}

func (h *errorLogHandler) WithGroup(name string) slog.Handler {
	n := *h
	if n.group != "" {
		name = n.group + "." + name
	}
	n.group = name
	return &n
}

// logPanic, deferred by the HTTP/3 handler, logs a handler's panic the way
// net/http does ("http3: panic serving ADDR: VALUE" and the stack; nothing
// for http.ErrAbortHandler), then panics with http.ErrAbortHandler so that
// quic-go resets the stream without logging it a second time. addr is the
// client's address as the request arrived with it.
func (h *h3Handler) logPanic(addr string) {
	p := recover()
	if p == nil {
		return
	}
	if p != http.ErrAbortHandler {
		const size = 64 << 10 // as net/http
		buf := make([]byte, size)
		buf = buf[:runtime.Stack(buf, false)]
		msg := fmt.Sprintf("http3: panic serving %v: %v\n%s", addr, p, buf)
		if h.errorLog != nil {
			h.errorLog.Print(msg)
		} else {
			log.Print(msg)
		}
	}
	panic(http.ErrAbortHandler)
}
