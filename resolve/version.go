package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
)

// VersionPrefix begins every version of a provider's answer: the rest is
// the hex SHA-256 of the items' canonical JSON.
const VersionPrefix = "sha256:"

// Versioned returns the canonical JSON of items — an array of their wire
// form (WireItem), in the order given, RFC 8785 — and its version,
// "sha256:" and the body's SHA-256 in hex. Two answers with the same
// items in the same order have the same version, however they were sent.
func Versioned(items []agentplane.ResolverItem) (version string, body []byte, err error) {
	wire := make([]WireItem, len(items))
	for i := range items {
		wire[i] = wireOf(&items[i])
	}
	raw, err := json.Marshal(wire)
	if err != nil {
		return "", nil, fmt.Errorf("encode items: %w", err)
	}
	if body, err = canonjson.Append(nil, raw, nil); err != nil {
		return "", nil, fmt.Errorf("encode items: %w", err)
	}
	return VersionOf(body), body, nil
}

// VersionOf returns the version of an answer's canonical JSON (Versioned's
// body).
func VersionOf(body []byte) string {
	sum := sha256.Sum256(body)
	return VersionPrefix + hex.EncodeToString(sum[:])
}

// ShortVersion is the first 12 hex digits of a version, for messages.
func ShortVersion(v string) string {
	h := strings.TrimPrefix(v, VersionPrefix)
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// StoredIndex indexes the items of an answer kept under version (the
// body Versioned returned for it): the index replay serves in place of
// the provider. A body that does not digest to version, or is not an
// array of items, is an error.
func StoredIndex(version string, body []byte) (*Index, error) {
	if VersionOf(body) != version {
		return nil, fmt.Errorf("items %s: the body's SHA-256 is another", version)
	}
	items, err := DecodeItems(body)
	if err != nil {
		return nil, fmt.Errorf("items %s: %w", version, err)
	}
	ix, err := NewIndex(items)
	if err != nil {
		return nil, fmt.Errorf("items %s: %w", version, err)
	}
	ix.version = version
	return ix, nil
}

// Version returns the version of the provider's answer the index holds
// (Versioned); "" for the index of a catalog given in configuration,
// whose items the configuration's digest names.
func (ix *Index) Version() string { return ix.version }

// wireOf is the wire form of an item (the inverse of WireItem.Item).
func wireOf(it *agentplane.ResolverItem) WireItem {
	w := WireItem{ID: it.Header.ID, DisplayName: it.Header.DisplayName, Description: it.Description,
		Aliases: it.Aliases, Keywords: it.Keywords, UsageCount: it.UsageCount}
	for _, r := range it.Related {
		w.Related = append(w.Related, WireRelated{EntityType: r.EntityType, ID: r.Header.ID, DisplayName: r.Header.DisplayName, Role: r.Role})
	}
	return w
}

// KeepFunc keeps a provider's answer by its version before the answer is
// served (a store's PutCatalogVersion), so that every version a decision
// names can be found again. It may be called from several goroutines.
type KeepFunc func(ctx context.Context, version string, body []byte) error

// Pins are the versions replay serves in place of providers: Pinned
// returns the index of the answer a recorded decision read from the
// source, or false when there is none to serve (the provider is asked);
// Named reports whether the record names an answer of the source at all
// (one that records read is named whenever it was at hand, so a record
// that names none read none: Source.Current serves nothing then, as it
// did when the record was made). They are called from the goroutine that
// routes or checks, one at a time.
type Pins interface {
	Pinned(ctx context.Context, id agentplane.ResolverSource) (*Index, bool)
	Named(id agentplane.ResolverSource) bool
}

type pinsKey struct{}

// WithPins returns ctx in which provider sources serve what pins hold
// instead of asking their providers: replay decides a record on the
// items its decision read.
func WithPins(ctx context.Context, p Pins) context.Context {
	return context.WithValue(ctx, pinsKey{}, p)
}

// pinned returns the index ctx's pins hold for the source, if any.
func pinned(ctx context.Context, id agentplane.ResolverSource) (*Index, bool) {
	if ctx == nil {
		return nil, false
	}
	p, ok := ctx.Value(pinsKey{}).(Pins)
	if !ok {
		return nil, false
	}
	return p.Pinned(ctx, id)
}

// unread reports whether ctx's pins say the record read no answer of
// the source (Pins.Named).
func unread(ctx context.Context, id agentplane.ResolverSource) bool {
	if ctx == nil {
		return false
	}
	p, ok := ctx.Value(pinsKey{}).(Pins)
	return ok && !p.Named(id)
}

// IsPinned reports whether ctx carries pins (WithPins): what is served
// there is replay's, not the providers'.
func IsPinned(ctx context.Context) bool {
	_, ok := ctx.Value(pinsKey{}).(Pins)
	return ok
}
