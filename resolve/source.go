package resolve

import (
	"context"
	"fmt"
	"sync"
	"time"

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
// first use and again when they are older than the TTL. When a refresh
// fails, the last good index keeps serving (and the failure is reported);
// with none, Index returns the error. Safe for concurrent use.
type Source struct {
	id       agentplane.ResolverSource
	provider Provider
	ttl      time.Duration
	now      func() time.Time

	mu        sync.Mutex
	index     *Index
	fetchedAt time.Time
}

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

// Index returns the current index. stale is non-nil when a refresh failed
// and an older index is served; err is non-nil, with an
// agentplane.CodeSourceUnavailable code, when there is no index at all.
func (s *Source) Index(ctx context.Context) (ix *Index, stale error, err error) {
	if s.provider == nil {
		return s.index, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.index != nil && now.Sub(s.fetchedAt) < s.ttl {
		return s.index, nil, nil
	}
	fresh, ferr := s.fetch(ctx)
	if ferr != nil {
		ferr = &agentplane.Error{Code: agentplane.CodeSourceUnavailable, Message: fmt.Sprintf("%s: %v", s.id, ferr)}
		if s.index != nil {
			return s.index, ferr, nil
		}
		return nil, nil, ferr
	}
	s.index, s.fetchedAt = fresh, now
	return fresh, nil, nil
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
