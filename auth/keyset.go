package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// How the provider's keys are kept fresh: they are fetched again every
// refreshEvery whatever the tokens name (so a key the provider removed is
// refused within that and a fetch's time), and at once when a token names
// a key not known; but never more than once per refetchEvery, so that a
// flood of tokens naming made-up key ids cannot become a flood of
// requests to the provider.
const (
	refreshEvery = 5 * time.Minute
	refetchEvery = 5 * time.Second
)

// keySet is the provider's JSON Web Key Set (oidc.KeySet). A token signed
// with a key it holds verifies at once, whatever the provider is doing: a
// refresh that falls due starts in the background, and a provider that
// is down or slow leaves the keys as they were. A token naming a key it
// does not hold waits for a fetch (at most one per refetchEvery, bounded
// by the caller's context). When a fetch drops or replaces a key, removed
// is told its id, so that what was verified with it is forgotten. It is
// safe for concurrent use; Close waits for a fetch in flight.
type keySet struct {
	url     string
	client  *http.Client
	now     func() time.Time
	algs    []jose.SignatureAlgorithm
	removed func(kids []string)

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time // when keys were last read from the provider
	tried    time.Time // when a fetch last started
	inflight *keyFetch // the fetch running; nil when none
	wg       sync.WaitGroup
}

// keyFetch is one fetch of the key set; done is closed when it ends.
type keyFetch struct {
	done chan struct{}
	err  error
}

// start begins a fetch unless one is running (which it returns) or one
// began within refetchEvery (nil); k.mu is held.
func (k *keySet) start() *keyFetch {
	if k.inflight != nil {
		return k.inflight
	}
	if !k.tried.IsZero() && k.now().Sub(k.tried) < refetchEvery {
		return nil
	}
	f := &keyFetch{done: make(chan struct{})}
	k.inflight, k.tried = f, k.now()
	k.wg.Go(func() { k.run(f) })
	return f
}

// run fetches the keys, keeps them if the provider answered, and says
// which were removed.
func (k *keySet) run(f *keyFetch) {
	ctx, cancel := context.WithTimeout(context.Background(), keyFetchTimeout)
	defer cancel()
	keys, err := k.get(ctx)
	var gone []string
	k.mu.Lock()
	if err == nil {
		gone = removedKeys(k.keys, keys)
		k.keys, k.fetched = keys, k.now()
	}
	f.err, k.inflight = err, nil
	k.mu.Unlock()
	if len(gone) > 0 && k.removed != nil {
		k.removed(gone)
	}
	close(f.done)
}

// refresh starts a fetch in the background when the keys are due for
// one: the keys held answer meanwhile.
func (k *keySet) refresh() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.now().Sub(k.fetched) >= refreshEvery {
		k.start()
	}
}

// Close waits for a fetch in flight to end (it is bounded by
// keyFetchTimeout).
func (k *keySet) Close() { k.wg.Wait() }

// VerifySignature returns the payload of a JWS signed with one of the
// provider's keys (the verifier has checked its algorithm).
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(jwt, k.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("malformed jwt: %v", err)
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	k.refresh()
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	k.mu.Lock()
	f := k.start()
	k.mu.Unlock()
	if f != nil {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("fetching keys: %w", ctx.Err())
		}
		if f.err != nil {
			return nil, fmt.Errorf("fetching keys: %w", f.err)
		}
	}
	k.mu.Lock()
	keys = k.keys
	k.mu.Unlock()
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	return nil, errors.New("no key of the provider verifies the signature")
}

// verifyWith checks a JWS with the keys of its key id (every key when it
// names none).
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) ([]byte, bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// removedKeys returns the ids of the keys in was that now lacks, or holds
// with other key material.
func removedKeys(was, now []jose.JSONWebKey) []string {
	var gone []string
	for _, old := range was {
		kept := slices.ContainsFunc(now, func(n jose.JSONWebKey) bool {
			pub, ok := n.Key.(interface{ Equal(crypto.PublicKey) bool })
			return n.KeyID == old.KeyID && ok && pub.Equal(old.Key)
		})
		if !kept {
			gone = append(gone, old.KeyID)
		}
	}
	return gone
}

// get reads the key set: the keys of algorithms and types it knows (the
// others are skipped, as RFC 7517 §5 asks).
func (k *keySet) get(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %v", k.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", k.url, resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: not a JSON Web Key Set: %v", k.url, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || !key.Valid() || !key.IsPublic() {
			continue // a type or curve go-jose does not know, or not a public key
		}
		keys = append(keys, key)
	}
	return keys, nil
}
