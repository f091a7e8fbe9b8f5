package httpapi

import (
	"context"
	"runtime"
	"sync"

	"golang.org/x/time/rate"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
)

// What one principal may hold at once, and how fast anonymous requests
// reach the identity provider. A request past a cap is answered 429
// too_many_requests naming it.
const (
	// DefaultStreamsPerPrincipal is how many event streams (SSE and
	// WebSocket, of sessions, the inbox and workflows) a principal may
	// hold open at once unless Options say otherwise: a browser holds six
	// connections to a server, a service following many sessions more.
	DefaultStreamsPerPrincipal = 100
	// tokenRate and tokenBurst bound the page's code exchanges
	// (POST /v1/auth/token), which anyone may send and which the server
	// relays to the provider: 10 a second, 20 at once.
	tokenRate  = 10
	tokenBurst = 20
)

// limits holds what each principal holds now: open streams, and the
// whole-chain reads (verification, replay) running. It is safe for
// concurrent use.
type limits struct {
	streams int           // per principal; ≤ 0: no cap
	chains  chan struct{} // whole-chain reads running at once, server-wide
	token   *rate.Limiter // code exchanges relayed to the provider

	mu      sync.Mutex
	open    map[string]int  // streams, by principal
	reading map[string]bool // a whole-chain read running or waiting, by principal
}

func newLimits(streams int) *limits {
	if streams == 0 {
		streams = DefaultStreamsPerPrincipal
	}
	return &limits{streams: streams, chains: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		token: rate.NewLimiter(tokenRate, tokenBurst), open: map[string]int{}, reading: map[string]bool{}}
}

// holdStream counts a stream the principal opens; release uncounts it.
// Past the cap it refuses, naming it.
func (l *limits) holdStream(p auth.Principal) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.open[p.ID]; l.streams > 0 && n >= l.streams {
		return nil, agentplane.Errorf(agentplane.CodeTooManyRequests,
			"too many event streams: this principal holds %d open, the cap (serve --max-streams); close one first", n)
	}
	l.open[p.ID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[p.ID]--; l.open[p.ID] <= 0 {
				delete(l.open, p.ID)
			}
		})
	}, nil
}

// holdChain admits a read of a whole chain (verifying or replaying it,
// which costs CPU in proportion to the session): one at a time per
// principal — another is refused while one runs — and at most half the
// server's cores' worth at once, server-wide (a read waits for its turn,
// as long as its request lasts), so that other people's turns keep the
// rest.
func (l *limits) holdChain(ctx context.Context, p auth.Principal, what string) (release func(), err error) {
	l.mu.Lock()
	if l.reading[p.ID] {
		l.mu.Unlock()
		return nil, agentplane.Errorf(agentplane.CodeTooManyRequests,
			"a %s of this principal is already running: one at a time (the cap on whole-chain reads); try again when it has answered", what)
	}
	l.reading[p.ID] = true
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		delete(l.reading, p.ID)
		l.mu.Unlock()
	}
	select {
	case l.chains <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, agentplane.Errorf(agentplane.CodeTooManyRequests, "the %s waited for its turn and its request ended", what)
	}
	return func() {
		<-l.chains
		done()
	}, nil
}
