// Package auth says who a request to the server acts for: API keys from
// the configuration, mapped to principals. Keys are kept only as SHA-256
// digests, compared in constant time, and never logged.
//
//	keys, err := auth.New(cfg.Auth, os.Getenv)
//	p, err := keys.Authenticate(r.Header.Get("Authorization"))
//	ctx = auth.With(ctx, p)
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
)

// Local is the principal of a server with no keys: it binds to loopback
// only, and whoever reaches it is the local user.
var Local = Principal{ID: agentplane.LocalPrincipal}

// Principal is who a request acts for: a user id and its roles.
type Principal struct {
	ID    string
	Roles []string
}

// Keys maps API keys to principals. The zero Keys has none. Replace
// swaps in another configuration's keys; it is safe for concurrent use.
type Keys struct {
	t atomic.Pointer[keyTable]
}

// keyTable is the keys of one configuration; never changed once made.
type keyTable struct {
	digests    [][sha256.Size]byte
	principals []Principal
}

// Replace makes k hold n's keys from now on (a reloaded configuration's):
// a request authenticated before keeps its principal.
func (k *Keys) Replace(n *Keys) {
	k.t.Store(n.t.Load())
}

func (k *Keys) table() *keyTable {
	if t := k.t.Load(); t != nil {
		return t
	}
	return &keyTable{}
}

// New reads the configured keys; a key given by environment variable is
// read through getenv now, and one that is unset or empty is an error
// naming the variable.
func New(cfg config.Auth, getenv func(string) string) (*Keys, error) {
	k := &keyTable{}
	for i, c := range cfg.Keys {
		var d [sha256.Size]byte
		switch {
		case c.KeyEnv != "":
			v := getenv(c.KeyEnv)
			if v == "" {
				return nil, fmt.Errorf("auth.keys[%d] (user %s): environment variable %s is not set", i, c.UserID, c.KeyEnv)
			}
			if len(v) < 16 {
				return nil, fmt.Errorf("auth.keys[%d] (user %s): the key in %s is shorter than 16 characters; use a random one (agentplane keygen)", i, c.UserID, c.KeyEnv)
			}
			d = sha256.Sum256([]byte(v))
		default:
			if _, err := hex.Decode(d[:], []byte(c.KeySHA256)); err != nil || len(c.KeySHA256) != 2*sha256.Size {
				return nil, fmt.Errorf("auth.keys[%d] (user %s): key_sha256 is not a SHA-256 digest", i, c.UserID)
			}
		}
		if slices.Contains(k.digests, d) {
			return nil, fmt.Errorf("auth.keys[%d] (user %s): the same key as an earlier entry", i, c.UserID)
		}
		k.digests = append(k.digests, d)
		k.principals = append(k.principals, Principal{ID: c.UserID, Roles: slices.Clone(c.Roles)})
	}
	keys := &Keys{}
	keys.t.Store(k)
	return keys, nil
}

// Len returns how many keys there are.
func (k *Keys) Len() int { return len(k.table().digests) }

// Authenticate returns the principal of an Authorization header
// ("Bearer KEY"). With no keys configured everyone is Local. An error has
// code unauthorized and never contains the key.
func (k *Keys) Authenticate(header string) (Principal, error) {
	t := k.table()
	if len(t.digests) == 0 {
		return Local, nil
	}
	scheme, key, ok := strings.Cut(header, " ")
	if header == "" {
		return Principal{}, agentplane.Errorf(agentplane.CodeUnauthorized, "missing API key: send Authorization: Bearer KEY")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return Principal{}, agentplane.Errorf(agentplane.CodeUnauthorized, "the Authorization header is not \"Bearer KEY\"")
	}
	d := sha256.Sum256([]byte(key))
	found := -1
	for i := range t.digests { // every key is compared: the time says nothing about which matched
		if subtle.ConstantTimeCompare(d[:], t.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, agentplane.Errorf(agentplane.CodeUnauthorized, "unknown API key")
	}
	p := t.principals[found]
	p.Roles = slices.Clone(p.Roles)
	return p, nil
}

type ctxKey struct{}

// With returns ctx carrying the principal.
func With(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the principal ctx carries.
func From(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}
