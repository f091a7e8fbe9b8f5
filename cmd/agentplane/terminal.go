package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// terminal is a log handler for a person at a terminal: one line a record,
// "agentplane: warning: what happened (key: value, …)", values as they
// are, not quoted. serve logs JSON instead.
type terminal struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func (h *terminal) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *terminal) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("agentplane: ")
	if r.Level >= slog.LevelWarn {
		b.WriteString(strings.ToLower(r.Level.String()))
		if r.Level == slog.LevelWarn {
			b.WriteString("ing")
		}
		b.WriteString(": ")
	}
	b.WriteString(r.Message)
	var parts []string
	add := func(a slog.Attr) bool {
		parts = append(parts, fmt.Sprintf("%s: %v", a.Key, a.Value.Resolve()))
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	b.WriteByte('\n')
	if h.mu != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
	}
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *terminal) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	return &c
}

func (h *terminal) WithGroup(string) slog.Handler { return h }
