// Package oidctest is an OpenID Connect provider for tests: discovery, a
// JWKS of its own RSA keys (rotated on demand, slowed or taken down), an
// authorization endpoint that approves its one user at once (PKCE S256
// required), a token endpoint, and tokens signed with go-jose — valid or
// broken on purpose.
package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Provider is a running test provider.
type Provider struct {
	URL string // the issuer

	// User is whom the authorization endpoint signs in; Claims are added to
	// the tokens its token endpoint issues.
	User   string
	Claims map[string]any

	mu        sync.Mutex
	keys      []key // newest last; the JWKS lists those not retired
	codes     map[string]grant
	delay     time.Duration
	down      bool
	JWKSHits  atomic.Int32 // JWKS requests answered
	TokenHits atomic.Int32 // token endpoint requests received
}

type key struct {
	id      string
	priv    *rsa.PrivateKey
	retired bool
}

type grant struct {
	clientID, redirect, challenge, resource, scope string
}

// New starts a provider, stopped when the test ends.
func New(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{User: "carol", codes: map[string]grant{}}
	p.Rotate()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize", "token_endpoint": p.URL + "/token",
			"jwks_uri": p.URL + "/jwks", "response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "subject_types_supported": []string{"public"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		delay, down := p.delay, p.down
		var set jose.JSONWebKeySet
		for _, k := range p.keys {
			if !k.retired {
				set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.id, Algorithm: "RS256", Use: "sig"})
			}
		}
		p.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		p.JWKSHits.Add(1)
		writeJSON(w, set)
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	return p
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Rotate adds a new signing key (the previous ones stay in the JWKS).
func (p *Provider) Rotate() {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, key{id: fmt.Sprintf("k%d", len(p.keys)+1), priv: priv})
}

// Retire takes a key out of the JWKS (its tokens stay signed with it):
// what a provider does when a key is compromised or rotated out.
func (p *Provider) Retire(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.keys {
		if p.keys[i].id == kid {
			p.keys[i].retired = true
		}
	}
}

// KeyID returns the id of the newest key, the one Token signs with.
func (p *Provider) KeyID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[len(p.keys)-1].id
}

// SignRaw signs the exact header and payload bytes with the newest key
// (RS256, whatever the header says): what a JSON encoder would never
// write, such as a member given twice. An empty header is the usual one.
func (p *Provider) SignRaw(header, payload []byte) string {
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	p.mu.Unlock()
	if len(header) == 0 {
		header = []byte(`{"alg":"RS256","kid":"` + k.id + `","typ":"JWT"}`)
	}
	enc := base64.RawURLEncoding.EncodeToString
	input := enc(header) + "." + enc(payload)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.priv, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return input + "." + enc(sig)
}

// JWKS makes the key set slow (delay) or down.
func (p *Provider) JWKS(delay time.Duration, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.down = delay, down
}

// Token signs claims with the newest key (RS256); iss, iat and exp (one
// hour) are added unless given.
func (p *Provider) Token(claims map[string]any) string {
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	p.mu.Unlock()
	return p.SignWith(k.priv, k.id, jose.RS256, claims)
}

// SignWith signs claims with a key and algorithm of the caller's choice
// (an unknown key, another algorithm).
func (p *Provider) SignWith(priv *rsa.PrivateKey, kid string, alg jose.SignatureAlgorithm, claims map[string]any) string {
	c := map[string]any{"iss": p.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	payload, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: priv, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return s
}

// With returns a copy of claims with k set to v (nil: removed, when
// signed).
func With(claims map[string]any, k string, v any) map[string]any {
	c := maps.Clone(claims)
	c[k] = v
	return c
}

// Unsigned is a token with alg none: what a verifier must never accept.
func (p *Provider) Unsigned(claims map[string]any) string {
	c := map[string]any{"iss": p.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	payload, _ := json.Marshal(c)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
}

// authorize approves the provider's user for a PKCE (S256) request and
// sends the browser back with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" || q.Get("response_type") != "code" || q.Get("client_id") == "" ||
		q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256" {
		http.Error(w, "bad authorization request: want response_type=code, client_id, redirect_uri and a S256 code_challenge", http.StatusBadRequest)
		return
	}
	code := randomString()
	p.mu.Lock()
	p.codes[code] = grant{clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), scope: q.Get("scope")}
	p.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	back.Set("iss", p.URL)
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token trades a code, once, for an access token whose audience is the
// resource asked for.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.TokenHits.Add(1)
	fail := func(code, desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "authorization_code" {
		fail("unsupported_grant_type", "want authorization_code")
		return
	}
	p.mu.Lock()
	g, ok := p.codes[r.Form.Get("code")]
	delete(p.codes, r.Form.Get("code")) // once
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
	switch {
	case !ok:
		fail("invalid_grant", "unknown or used code")
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		fail("invalid_grant", "the code_verifier does not match the code_challenge")
	case r.Form.Get("client_id") != g.clientID || r.Form.Get("redirect_uri") != g.redirect:
		fail("invalid_grant", "client_id or redirect_uri differs from the authorization request")
	default:
		claims := map[string]any{"sub": p.User, "aud": g.resource, "scope": g.scope, "client_id": g.clientID}
		for k, v := range p.Claims {
			claims[k] = v
		}
		writeJSON(w, map[string]any{"access_token": p.Token(claims), "token_type": "Bearer", "expires_in": 3600})
	}
}

func randomString() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
