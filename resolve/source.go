package resolve

import (
	"context"
	"fmt"
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

// Source serves the index of one catalog or provider. A static source is
// indexed once; a provider-backed source fetches and indexes its items on
// first use and again when they are older than the TTL.
//
// A fetch is shared: callers arriving while one runs wait for it when
// there is no index yet, and are served the index they have when there is
// one. When a fetch fails, the last good index keeps serving (and the
// failure is reported with it); with none, Index returns the error. After
// a failure no fetch is tried before a backoff has passed (1s, doubling up
// to a minute, on the source's clock), so a slow or dead provider costs a
// turn one fetch at most, not one per slot it resolves. Safe for
// concurrent use.
type Source struct {
	id       agentplane.ResolverSource
	provider Provider
	ttl      time.Duration
	now      func() time.Time
	fetches  singleflight.Group

	mu        sync.Mutex
	index     *Index
	fetchedAt time.Time
	fetching  bool
	lastErr   error         // the last failed fetch, until one succeeds
	retryAt   time.Time     // no fetch before this after a failure
	backoff   time.Duration // the wait after the last failure
}

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
// zero). now is the clock; nil means time.Now.
func NewProviderSource(id agentplane.ResolverSource, p Provider, ttl time.Duration, now func() time.Time) *Source {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Source{id: id, provider: p, ttl: ttl, now: now}
}

// ID returns which catalog or provider this is.
func (s *Source) ID() agentplane.ResolverSource { return s.id }

// Current returns the index the source holds now, fetching nothing: nil
// for a provider that has not answered yet.
func (s *Source) Current() *Index {
	if s.provider == nil {
		return s.index
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

// Index returns the current index. stale is non-nil when a refresh failed
// and an older index is served; err is non-nil, with an
// agentplane.CodeSourceUnavailable code, when there is no index at all.
func (s *Source) Index(ctx context.Context) (ix *Index, stale error, err error) {
	if s.provider == nil {
		return s.index, nil, nil
	}
	s.mu.Lock()
	now := s.now()
	ix, last := s.index, s.lastErr
	switch {
	case ix != nil && now.Sub(s.fetchedAt) < s.ttl:
		s.mu.Unlock()
		return ix, nil, nil
	case now.Before(s.retryAt) || ix != nil && s.fetching:
		// backing off after a failure, or another caller is refreshing:
		// serve what there is now
		s.mu.Unlock()
		if ix != nil {
			return ix, last, nil
		}
		return nil, nil, last
	}
	s.fetching = true
	s.mu.Unlock()
	s.fetches.Do("fetch", func() (any, error) {
		fresh, ferr := s.fetch(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.fetching = false
		if ferr != nil {
			s.lastErr = &agentplane.Error{Code: agentplane.CodeSourceUnavailable, Message: fmt.Sprintf("%s: %v", s.id, ferr)}
			s.backoff = min(max(2*s.backoff, minBackoff), maxBackoff)
			s.retryAt = now.Add(s.backoff)
			return nil, nil
		}
		s.index, s.fetchedAt, s.lastErr, s.backoff, s.retryAt = fresh, now, nil, 0, time.Time{}
		return nil, nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr != nil {
		if s.index != nil {
			return s.index, s.lastErr, nil
		}
		return nil, nil, s.lastErr
	}
	return s.index, nil, nil
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
	return NewIndex(items)
}
