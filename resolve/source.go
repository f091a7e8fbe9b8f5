package resolve

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/agentplane/agentplane"
)

// Provider returns the items of a resolver source that is not fixed in the
// configuration: code-backed providers and HTTP endpoints. Items must be
// safe to call from several goroutines at once; it should honour ctx.
type Provider interface {
	Items(ctx context.Context) ([]agentplane.ResolverItem, error)
}

// ProviderFunc adapts a function to the Provider interface.
type ProviderFunc func(ctx context.Context) ([]agentplane.ResolverItem, error)

// Items calls f.
func (f ProviderFunc) Items(ctx context.Context) ([]agentplane.ResolverItem, error) { return f(ctx) }

// DefaultTTL is how long provider items are cached when no TTL is configured.
const DefaultTTL = time.Minute

// Caller is who a provider answers: the principal, the session's mode
// and its active work context, so that a provider can answer per person
// (their own tickets) and per situation. A Go provider reads it with
// CallerFrom; an HTTP provider gets it in the Agentplane-Context header.
type Caller struct {
	UserID string
	Roles  []string
	Mode   string
	AWC    agentplane.ActiveWorkContext
}

// SessionCaller is the caller of a session: its owner (the local
// principal for a session nobody owns) with the roles given, in the mode
// given ("" for the session's), on its active work context.
func SessionCaller(s *agentplane.Session, roles []string, mode string) Caller {
	user := s.Owner
	if user == "" {
		user = agentplane.LocalPrincipal
	}
	if mode == "" {
		mode = s.Mode
	}
	return Caller{UserID: user, Roles: roles, Mode: mode, AWC: s.AWC}
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller a provider answers; the
// router, the gate and catalog searches set it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// scope is the cache key of what a provider answered a caller: one person
// never gets another's items, nor items fetched for another mode or
// another active item.
func (c Caller) scope() string {
	roles := slices.Clone(c.Roles)
	slices.Sort(roles)
	var b strings.Builder
	b.WriteString(c.UserID)
	for _, part := range append(roles, "\x00"+c.Mode, c.AWC.EntityType) {
		b.WriteByte(0)
		b.WriteString(part)
	}
	if c.AWC.Entity != nil {
		b.WriteByte(0)
		b.WriteString(c.AWC.Entity.ID)
	}
	return b.String()
}

// Source serves the index of one catalog or provider. A static source is
// indexed once; a provider-backed source fetches and indexes its items on
// first use and again when they are older than the TTL — for each caller
// (principal, roles, mode, active item) separately, so that what a
// provider answers one person is never served to another. At most
// MaxScopes callers' indexes are kept; the one used longest ago goes first.
//
// A fetch is shared: callers of one scope arriving while one runs wait for
// it when there is no index yet, and are served the index they have when
// there is one. When a fetch fails, the last good index keeps serving (and
// the failure is reported with it); with none, Index returns the error.
// After a failure no fetch is tried before a backoff has passed (1s,
// doubling up to a minute, on the source's clock), so a slow or dead
// provider costs a turn one fetch at most, not one per slot it resolves.
// Safe for concurrent use.
type Source struct {
	id       agentplane.ResolverSource
	provider Provider
	ttl      time.Duration
	now      func() time.Time
	keep     KeepFunc // where a provider's answers are kept before they are served; nil: nowhere
	fetches  singleflight.Group

	mu      sync.Mutex
	index   *Index            // a static source's; a provider's latest, of any scope (Current)
	scopes  map[string]*scope // a provider's, by Caller.scope
	counter uint64            // orders the scopes' last uses
}

// scope is what a provider answered one caller.
type scope struct {
	index     *Index
	fetchedAt time.Time
	fetching  bool
	lastErr   error         // the last failed fetch, until one succeeds
	retryAt   time.Time     // no fetch before this after a failure
	backoff   time.Duration // the wait after the last failure
	used      uint64
}

// MaxScopes bounds how many callers' indexes a provider source keeps.
const MaxScopes = 1024

// Backoff after failed fetches: from minBackoff, doubling to maxBackoff.
const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// NewStaticSource indexes items once, for a catalog given in configuration.
func NewStaticSource(id agentplane.ResolverSource, items []agentplane.ResolverItem) (*Source, error) {
	ix, err := NewIndex(items)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	return &Source{id: id, index: ix}, nil
}

// NewProviderSource serves the items of p, cached for ttl (DefaultTTL if
// zero) per caller. now is the clock; nil means time.Now.
func NewProviderSource(id agentplane.ResolverSource, p Provider, ttl time.Duration, now func() time.Time) *Source {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Source{id: id, provider: p, ttl: ttl, now: now, scopes: map[string]*scope{}}
}

// Keep has the source keep each answer of its provider, by version,
// before serving it (see KeepFunc): an answer that cannot be kept is a
// failed fetch. Call it once, before the source is used; it does nothing
// on a static source.
func (s *Source) Keep(keep KeepFunc) {
	if s.provider != nil {
		s.keep = keep
	}
}

// Provided reports whether a provider serves the source's items (what it
// answers depends on the caller: see Index).
func (s *Source) Provided() bool { return s.provider != nil }

// ID returns which catalog or provider this is.
func (s *Source) ID() agentplane.ResolverSource { return s.id }

// Current returns the index the source holds now, fetching nothing: for a
// provider, the one it answered last, for any caller (nil when it has not
// answered yet), or the one ctx pins (WithPins) — nil when the pinned
// record names no answer of the source (it had none at hand). It is for
// what does not belong to a caller — shaping the configuration's own
// examples — never for showing items.
func (s *Source) Current(ctx context.Context) *Index {
	if s.provider == nil {
		return s.index
	}
	if unread(ctx, s.id) {
		return nil
	}
	if ix, ok := pinned(ctx, s.id); ok {
		return ix
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

// Index returns the current index for the caller ctx carries (WithCaller;
// none is a caller of its own). stale is non-nil when a refresh failed
// and an older index is served; err is non-nil, with an
// agentplane.CodeSourceUnavailable code, when there is no index at all.
// A provider's index names the answer it holds (Index.Version); in a
// context with pins (replay), the pinned answer is served and the
// provider is not asked.
func (s *Source) Index(ctx context.Context) (ix *Index, stale error, err error) {
	if s.provider == nil {
		return s.index, nil, nil
	}
	if ix, ok := pinned(ctx, s.id); ok {
		return ix, nil, nil
	}
	caller, _ := CallerFrom(ctx)
	key := caller.scope()
	s.mu.Lock()
	sc := s.scopes[key]
	if sc == nil {
		sc = &scope{}
		s.evict()
		s.scopes[key] = sc
	}
	s.counter++
	sc.used = s.counter
	now := s.now()
	ix, last := sc.index, sc.lastErr
	switch {
	case ix != nil && now.Sub(sc.fetchedAt) < s.ttl:
		s.mu.Unlock()
		return ix, nil, nil
	case now.Before(sc.retryAt) || ix != nil && sc.fetching:
		// backing off after a failure, or another caller is refreshing:
		// serve what there is now
		s.mu.Unlock()
		if ix != nil {
			return ix, last, nil
		}
		return nil, nil, last
	}
	sc.fetching = true
	s.mu.Unlock()
	s.fetches.Do(key, func() (any, error) {
		fresh, ferr := s.fetch(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		sc.fetching = false
		if ferr != nil {
			sc.lastErr = &agentplane.Error{Code: agentplane.CodeSourceUnavailable, Message: fmt.Sprintf("%s: %v", s.id, ferr)}
			sc.backoff = min(max(2*sc.backoff, minBackoff), maxBackoff)
			sc.retryAt = now.Add(sc.backoff)
			return nil, nil
		}
		sc.index, sc.fetchedAt, sc.lastErr, sc.backoff, sc.retryAt = fresh, now, nil, 0, time.Time{}
		s.index = fresh
		return nil, nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc.lastErr != nil {
		if sc.index != nil {
			return sc.index, sc.lastErr, nil
		}
		return nil, nil, sc.lastErr
	}
	return sc.index, nil, nil
}

// evict makes room for one more scope: the one used longest ago goes.
// s.mu is held.
func (s *Source) evict() {
	if len(s.scopes) < MaxScopes {
		return
	}
	var oldest string
	var at uint64
	for k, sc := range s.scopes {
		if oldest == "" || sc.used < at {
			oldest, at = k, sc.used
		}
	}
	delete(s.scopes, oldest)
}

func (s *Source) fetch(ctx context.Context) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil { // a provider's bug is a failed fetch, not a crash
			ix, err = nil, fmt.Errorf("provider panicked: %v", r)
		}
	}()
	items, err := s.provider.Items(ctx)
	if err != nil {
		return nil, err
	}
	version, body, err := Versioned(items)
	if err != nil {
		return nil, err
	}
	if s.keep != nil {
		if err := s.keep(ctx, version, body); err != nil {
			return nil, fmt.Errorf("keep items %s: %w", ShortVersion(version), err)
		}
	}
	if ix, err = NewIndex(items); err != nil {
		return nil, err
	}
	ix.version = version
	return ix, nil
}
