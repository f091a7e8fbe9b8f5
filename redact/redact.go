// Package redact keeps the secrets the server holds — the values of the
// environment variables the configuration names for headers, the LLM's
// API key, the database's password — out of everything it stores, shows
// and logs. A tool service that echoes its Authorization header in an
// error body would otherwise put the secret into the hash-chained audit
// log, where it cannot be removed without breaking the chain.
//
//	r := redact.New("Bearer s3cr3t")
//	r.String("401: bad header Bearer s3cr3t") // "401: bad header [redacted]"
//	r.JSON(json.RawMessage(`{"echo":"s3cr3t"}`)) // {"echo":"[redacted]"}
//
// A nil *Redactor redacts nothing.
package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask is what a secret is replaced with.
const Mask = "[redacted]"

// MinLen is the shortest value treated as a secret: shorter ones would
// mask ordinary words (and are no secrets worth the name).
const MinLen = 4

// Redactor replaces secrets in text and JSON. It is safe for concurrent
// use; Add extends the secrets it masks (a reloaded configuration's new
// header values), and a secret once masked stays masked.
type Redactor struct {
	mu  sync.Mutex // serializes Add
	set atomic.Pointer[secrets]
}

// secrets are what a Redactor masks at one time; never changed once made.
type secrets struct {
	plain *strings.Replacer // each secret by the mask
	any   []string          // the secrets, longest first
}

// New returns a Redactor of the values given (empty and short ones are
// skipped). A value with an HTTP authorization scheme ("Bearer x",
// "Basic x") is also a secret without it: services echo the token alone.
// nil when nothing is left to redact.
func New(values ...string) *Redactor {
	r := Growing(values...)
	if r.set.Load() == nil {
		return nil
	}
	return r
}

// Growing is New that never returns nil, for a holder of secrets that may
// learn more of them later (Add): it masks nothing until it has some.
func Growing(values ...string) *Redactor {
	r := &Redactor{}
	r.Add(values...)
	return r
}

// Add makes r mask the values given too, besides those it masks already
// (see New for which values count). It may be called concurrently with
// anything; what is masked changes at once for every later call.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []string
	if cur := r.set.Load(); cur != nil {
		all = slices.Clone(cur.any)
	}
	n := len(all)
	for _, v := range values {
		v = strings.TrimSpace(v)
		for _, s := range []string{v, afterScheme(v)} {
			if len(s) >= MinLen && !slices.Contains(all, s) {
				all = append(all, s)
			}
		}
	}
	if len(all) == n {
		return
	}
	// longest first: a secret that contains another is masked whole
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	var plain []string
	for _, s := range all {
		plain = append(plain, s, Mask)
	}
	r.set.Store(&secrets{plain: strings.NewReplacer(plain...), any: all})
}

// load returns the secrets masked now; nil for none.
func (r *Redactor) load() *secrets {
	if r == nil {
		return nil
	}
	return r.set.Load()
}

// afterScheme is the credentials of an authorization header value
// ("Bearer abc" → "abc"), or "".
func afterScheme(v string) string {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || strings.ContainsAny(scheme, "\t\"") {
		return ""
	}
	return strings.TrimSpace(cred)
}

// jsonEscaped is s as it appears inside a JSON string.
func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	set := r.load()
	if set == nil || !set.contains(s) {
		return s
	}
	return set.plain.Replace(s)
}

// JSON returns the JSON value b with every secret masked in its strings
// (member names and string values): decoded, masked and encoded again
// when a secret is there, else b unchanged. A secret that is only part of
// a number, or b that is not JSON, is left as it is. b is not changed.
func (r *Redactor) JSON(b json.RawMessage) json.RawMessage {
	set := r.load()
	if set == nil || len(b) == 0 || !set.containsJSON(string(b)) {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.value(v)); err != nil {
		return b
	}
	return json.RawMessage(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
}

// value masks the strings of a decoded JSON value.
func (r *Redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.value(e)
		}
		return out
	}
	return v
}

// Contains reports whether s holds a secret.
func (r *Redactor) Contains(s string) bool {
	set := r.load()
	return set != nil && set.contains(s)
}

func (r *secrets) contains(s string) bool {
	for _, v := range r.any {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

func (r *secrets) containsJSON(s string) bool {
	if r.contains(s) {
		return true
	}
	for _, v := range r.any {
		if e := jsonEscaped(v); e != v && strings.Contains(s, e) {
			return true
		}
	}
	return false
}

// Handler returns a log handler that masks secrets in the messages and
// the string, error and JSON attribute values of the records it passes to
// h. A nil Redactor returns h.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil {
		return h
	}
	if rh, ok := h.(*handler); ok {
		h = rh.next
	}
	return &handler{r: r, next: h}
}

type handler struct {
	r    *Redactor
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.attr(a)
	}
	return &handler{r: h.r, next: h.next.WithAttrs(masked)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, next: h.next.WithGroup(name)}
}

// attr masks secrets in an attribute's value, whatever its kind.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		masked := make([]any, len(g))
		for i, ga := range g {
			masked[i] = h.attr(ga)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case json.RawMessage:
			return slog.Any(a.Key, h.r.JSON(x))
		case []byte:
			return slog.String(a.Key, h.r.String(string(bytes.Clone(x))))
		case string:
			return slog.String(a.Key, h.r.String(x))
		default:
			// anything else is logged as its text: masked there
			if s := v.String(); h.r.Contains(s) {
				return slog.String(a.Key, h.r.String(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
