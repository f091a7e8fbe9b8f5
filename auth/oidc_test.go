package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/testkit/oidctest"
)

const audience = "https://agentplane.test/mcp"

func verifier(p *oidctest.Provider, scopes ...string) *auth.OIDC {
	return auth.NewOIDC(config.OIDC{Issuer: p.URL, Audience: audience, UserClaim: "sub", RolesClaim: "realm_access.roles",
		AllowedAlgs: config.DefaultAlgs, RequiredScopes: scopes}, nil, nil)
}

// Every way a token can be wrong is refused with its reason, and a good
// one gives its user and roles.
func TestVerifyTokens(t *testing.T) {
	p := oidctest.New(t)
	o := verifier(p)
	ctx := context.Background()
	good := map[string]any{"sub": "carol", "aud": audience, "realm_access": map[string]any{"roles": []any{"admin", "ops"}}}
	pr, err := o.Verify(ctx, p.Token(good))
	if err != nil || pr.ID != auth.Namespaced(p.URL, "carol") || len(pr.Roles) != 2 || pr.Roles[0] != "admin" {
		t.Fatalf("a good token: %+v %v", pr, err)
	}
	with := func(k string, v any) map[string]any { return oidctest.With(good, k, v) }
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	good2 := p.Token(good)
	parts := strings.Split(good2, ".")
	tampered := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	for name, c := range map[string]struct{ token, want string }{
		"expired":              {p.Token(with("exp", time.Now().Add(-time.Minute).Unix())), "expired"},
		"other audience":       {p.Token(with("aud", "https://other.example/mcp")), "another audience"},
		"other issuer":         {p.Token(with("iss", "https://evil.example")), "another provider"},
		"not yet":              {p.Token(with("nbf", time.Now().Add(time.Hour).Unix())), "not valid yet"},
		"unknown key":          {p.SignWith(stranger, "k99", jose.RS256, good), "does not verify"},
		"known kid, other key": {p.SignWith(stranger, "k1", jose.RS256, good), "does not verify"},
		"alg none":             {p.Unsigned(good), "algorithm"},
		"RS512":                {p.SignWith(stranger, "k1", jose.RS512, good), "algorithm"},
		"tampered":             {tampered, ""},
		"no user":              {p.Token(with("sub", nil)), "claim sub"},
		"not a JWT":            {"abc", "not a JWT"},
		"garbage":              {"a.b.c", "malformed"},
	} {
		_, err := o.Verify(ctx, c.token)
		var te *auth.TokenError
		if !errors.As(err, &te) || te.Code != "invalid_token" || !strings.Contains(te.Description, c.want) {
			t.Errorf("%s: %v, want invalid_token saying %q", name, err, c.want)
		}
		if strings.Contains(err.Error(), c.token) && len(c.token) > 10 {
			t.Errorf("%s: the error quotes the token", name)
		}
	}
	// scopes
	o = verifier(p, "agentplane")
	if _, err := o.Verify(ctx, p.Token(with("scope", "openid profile"))); err == nil || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Fatalf("missing scope: %v", err)
	}
	if _, err := o.Verify(ctx, p.Token(with("scope", "openid agentplane"))); err != nil {
		t.Fatalf("with the scope: %v", err)
	}
	if _, err := o.Verify(ctx, p.Token(with("scp", []any{"agentplane"}))); err != nil {
		t.Fatalf("with the scope as scp: %v", err)
	}
}

// Keys are fetched once and followed through a rotation; a JWKS that is
// down or slow does not stall a token signed with a key already known.
func TestKeysCachedAndRotated(t *testing.T) {
	p := oidctest.New(t)
	var skew atomic.Int64 // the verifier's clock runs ahead by this much
	o := auth.NewOIDC(config.OIDC{Issuer: p.URL, Audience: audience, UserClaim: "sub", AllowedAlgs: config.DefaultAlgs}, nil,
		func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	ctx := context.Background()
	claims := map[string]any{"sub": "carol", "aud": audience}
	old := p.Token(claims)
	fresh := func() string { // signed with the newest key, never seen before (so not in the verified cache)
		return p.Token(map[string]any{"sub": "carol", "aud": audience, "jti": time.Now().UnixNano()})
	}
	for range 5 {
		if _, err := o.Verify(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.JWKSHits.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches for five tokens of one key", n)
	}
	// a flood of tokens naming made-up keys: the provider is asked at
	// most once per few seconds, and each is refused for its signature
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	for i := range 20 {
		_, err := o.Verify(ctx, p.SignWith(stranger, fmt.Sprintf("made-up-%d", i), jose.RS256, claims))
		var te *auth.TokenError
		if !errors.As(err, &te) || !strings.Contains(te.Description, "does not verify") {
			t.Fatalf("a made-up key: %v", err)
		}
	}
	if n := p.JWKSHits.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches after 20 tokens of made-up keys", n)
	}
	skew.Add(int64(6 * time.Second)) // later: the provider may be asked again
	p.Rotate()
	if _, err := o.Verify(ctx, p.Token(claims)); err != nil {
		t.Fatalf("after a rotation: %v", err)
	}
	if n := p.JWKSHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches after a rotation", n)
	}
	// the JWKS slow, then down: known keys verify at once
	p.JWKS(10*time.Second, false)
	start := time.Now()
	if _, err := o.Verify(ctx, fresh()); err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("a known key while the JWKS is slow: %v after %v", err, time.Since(start))
	}
	p.JWKS(0, true)
	if _, err := o.Verify(ctx, fresh()); err != nil {
		t.Fatalf("a known key while the JWKS is down: %v", err)
	}
	// an unknown key while it is down: not verifiable, and not a refusal of the token
	skew.Add(int64(6 * time.Second))
	p.Rotate()
	_, err := o.Verify(ctx, p.Token(claims))
	var te *auth.TokenError
	if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "keys cannot be read") {
		t.Fatalf("a new key while the JWKS is down: %v", err)
	}
}

// A provider that cannot be reached is not a refusal either, and is not
// asked again at once.
func TestProviderDown(t *testing.T) {
	o := auth.NewOIDC(config.OIDC{Issuer: "http://127.0.0.1:1", Audience: audience, UserClaim: "sub", AllowedAlgs: config.DefaultAlgs}, nil, nil)
	_, err := o.Verify(context.Background(), "a.b.c")
	var te *auth.TokenError
	if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("provider down: %v", err)
	}
	start := time.Now()
	o.Verify(context.Background(), "a.b.c")
	if time.Since(start) > 100*time.Millisecond {
		t.Fatalf("the provider was asked again at once (%v)", time.Since(start))
	}
}

// Verification with the provider's keys cached (the goal is ≤ 50 µs):
// full, every token checked (RS256, 2048-bit), and a token already
// verified, as a client sends the same token on every request.
func BenchmarkVerifyToken(b *testing.B) {
	p := oidctest.New(b)
	tok := p.Token(map[string]any{"sub": "carol", "aud": audience, "realm_access": map[string]any{"roles": []any{"admin"}}})
	for _, full := range []bool{true, false} {
		name := "seen"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			o := verifier(p)
			if full {
				o.NoCache()
			}
			if _, err := o.Verify(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := o.Verify(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzAuthenticate: no Authorization header panics, and every refusal is
// unauthorized (or, for a token that needs keys the provider cannot give,
// source_unavailable) — never an internal error.
func FuzzAuthenticate(f *testing.F) {
	p := oidctest.New(f)
	a := &auth.Authenticator{Keys: &auth.Keys{}, OIDC: verifier(p)}
	good := p.Token(map[string]any{"sub": "carol", "aud": audience})
	for _, s := range []string{"", "Bearer ", "Bearer " + good, "Bearer a.b.c", "Basic x", "bearer " + p.Unsigned(map[string]any{"sub": "x"}),
		"Bearer eyJhbGciOiJSUzI1NiJ9.e30.", "Bearer ...", "Bearer " + good[:len(good)-3]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		pr, err := a.Authenticate(context.Background(), header)
		if err == nil {
			if pr.ID != auth.Namespaced(p.URL, "carol") {
				t.Fatalf("%q: accepted as %q", header, pr.ID)
			}
			return
		}
		if code := agentplane.ErrorCode(err); code != agentplane.CodeUnauthorized && code != agentplane.CodeSourceUnavailable {
			t.Fatalf("%q: %v (code %s)", header, err, code)
		}
	})
}

// A correctly signed token whose header or claims are not strict JSON is
// refused, as a body would be: every claim of a good token given twice
// (with the same value, another one, or a name differing only in case),
// nested ones too, and the header's members. The same bytes without the
// repetition verify, so it is the repetition that is refused.
func TestDuplicateClaimsRefused(t *testing.T) {
	p := oidctest.New(t)
	o := verifier(p)
	o.NoCache()
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Unix()
	members := []string{
		`"sub":"carol"`, `"aud":"` + audience + `"`, `"iss":"` + p.URL + `"`, fmt.Sprintf(`"exp":%d`, exp),
		fmt.Sprintf(`"iat":%d`, time.Now().Unix()), `"scope":"openid agentplane"`, `"realm_access":{"roles":["ops"]}`,
	}
	payload := func(extra string) []byte { return []byte("{" + strings.Join(members, ",") + extra + "}") }
	if pr, err := o.Verify(ctx, p.SignRaw(nil, payload(""))); err != nil || pr.ID != auth.Namespaced(p.URL, "carol") || len(pr.Roles) != 1 {
		t.Fatalf("the strict token: %+v %v", pr, err)
	}
	cases := map[string][]byte{
		"sub twice, another user": payload(`,"sub":"alice"`),
		"sub twice, the same":     payload(`,"sub":"carol"`),
		"Sub beside sub":          payload(`,"Sub":"alice"`),
		"aud twice":               payload(`,"aud":"https://other.example/mcp"`),
		"iss twice":               payload(`,"iss":"https://evil.example"`),
		"exp twice":               payload(fmt.Sprintf(`,"exp":%d`, exp+86400)),
		"scope twice":             payload(`,"scope":"openid"`),
		"realm_access twice":      payload(`,"realm_access":{"roles":["admin"]}`),
		"roles twice, nested":     []byte("{" + strings.Join(members[:6], ",") + `,"realm_access":{"roles":["ops"],"roles":["admin"]}}`),
		"a number out of range":   payload(`,"n":1e999`),
		"invalid UTF-8":           payload(",\"x\":\"\xff\""),
		"a lone surrogate":        payload(`,"x":"\ud800"`),
	}
	for name, raw := range cases {
		_, err := o.Verify(ctx, p.SignRaw(nil, raw))
		var te *auth.TokenError
		if !errors.As(err, &te) || te.Code != "invalid_token" || !strings.Contains(te.Description, "claims are not strict JSON") {
			t.Errorf("%s: %v, want invalid_token: claims not strict JSON", name, err)
		}
	}
	kid := p.KeyID()
	for name, header := range map[string]string{
		"kid twice": `{"alg":"RS256","kid":"` + kid + `","kid":"k9","typ":"JWT"}`,
		"alg twice": `{"alg":"RS256","alg":"RS256","kid":"` + kid + `","typ":"JWT"}`,
		"Kid, kid":  `{"alg":"RS256","Kid":"k9","kid":"` + kid + `","typ":"JWT"}`,
	} {
		_, err := o.Verify(ctx, p.SignRaw([]byte(header), payload("")))
		var te *auth.TokenError
		if !errors.As(err, &te) || !strings.Contains(te.Description, "header is not strict JSON") {
			t.Errorf("%s: %v, want invalid_token: header not strict JSON", name, err)
		}
	}
}

// A key the provider takes out of its key set is refused within the
// refresh period: the keys are fetched again after 5 minutes whatever the
// tokens name, and the tokens verified with the removed key are
// forgotten — the one a client keeps sending as much as a new one. Before
// the refresh falls due nothing is fetched, and a provider that is down
// when it does leaves the keys (and known tokens) as they were.
func TestRemovedKeyRefused(t *testing.T) {
	p := oidctest.New(t)
	var skew atomic.Int64
	o := auth.NewOIDC(config.OIDC{Issuer: p.URL, Audience: audience, UserClaim: "sub", AllowedAlgs: config.DefaultAlgs}, nil,
		func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	t.Cleanup(o.Close)
	ctx := context.Background()
	n := 0
	token := func() string { // each one new, so verified in full
		n++
		return p.Token(map[string]any{"sub": "carol", "aud": audience, "jti": n})
	}
	kept := token() // signed with k1, sent on every request
	if _, err := o.Verify(ctx, kept); err != nil {
		t.Fatal(err)
	}
	old := p.KeyID()
	p.Rotate()
	p.Retire(old)
	// within the period: nothing fetched, k1 still trusted
	skew.Add(int64(4 * time.Minute))
	if _, err := o.Verify(ctx, kept); err != nil {
		t.Fatalf("before the refresh: %v", err)
	}
	if h := p.JWKSHits.Load(); h != 1 {
		t.Fatalf("%d fetches before the refresh is due", h)
	}
	// past it: the request that finds the keys due is answered with what
	// is held, the refresh runs beside it, and then k1 is refused
	skew.Add(int64(2 * time.Minute))
	refused := func(tok string) bool {
		_, err := o.Verify(ctx, tok)
		var te *auth.TokenError
		return errors.As(err, &te) && strings.Contains(te.Description, "does not verify")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !refused(kept) {
		if time.Now().After(deadline) {
			t.Fatal("a token of a key the provider removed is still accepted after the refresh")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if h := p.JWKSHits.Load(); h != 2 {
		t.Fatalf("%d fetches, want 2", h)
	}
	if _, err := o.Verify(ctx, token()); err != nil { // the new key, learnt by the refresh
		t.Fatalf("a token of the new key: %v", err)
	}
	if h := p.JWKSHits.Load(); h != 2 {
		t.Fatalf("%d fetches after a token of the key the refresh brought, want 2", h)
	}
	// the provider down when the next refresh falls due: known keys still
	// verify, and it is asked at most once per 5 s
	p.JWKS(0, true)
	skew.Add(int64(6 * time.Minute))
	for range 20 {
		if _, err := o.Verify(ctx, token()); err != nil {
			t.Fatalf("a known key with the provider down: %v", err)
		}
	}
	o.Close() // the refresh in flight has ended
	p.JWKS(0, false)
	if h := p.JWKSHits.Load(); h != 2 { // down: answered 503, not counted
		t.Fatalf("%d fetches answered", h)
	}
}
