package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/canonjson"
)

// OIDC verifies the access tokens an OpenID Connect provider issues for
// this server (JWTs, RFC 9068): header and claims as strict JSON (a claim
// given twice is refused), the signature with the provider's keys
// (discovered, cached, fetched again every 5 minutes and when a token
// names a key not seen yet, so a rotation is followed, a key the provider
// removed is refused within minutes, and a provider that is down locks
// out only tokens signed with keys the server never saw), the issuer, the audience
// (this server's resource identifier, RFC 8707), expiry and not-before,
// the algorithm (allowed_algs; never none), and the required scopes. It
// is safe for concurrent use.
type OIDC struct {
	cfg    config.OIDC
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	keys     *keySet // the verifier's
	meta     Provider
	tried    time.Time // the last failed discovery
	failed   error

	// verified are tokens already verified, by their SHA-256, until they
	// expire: a client sends the same token on every request, and its
	// signature need not be checked each time.
	cacheMu  sync.Mutex
	verified map[[sha256.Size]byte]verifiedToken
	epoch    uint64 // moves when keys are removed: a verification begun before is not remembered
	nocache  bool   // tests: every token verified in full
}

type verifiedToken struct {
	p   Principal
	exp time.Time
	kid string // the key it was verified with: forgotten when the provider drops the key
}

// maxVerified bounds the verified-token cache.
const maxVerified = 10000

// Provider is what the provider's discovery document says.
type Provider struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
}

// Timeouts of the provider's endpoints, and how long a failed discovery
// is not tried again.
const (
	providerTimeout = 10 * time.Second
	keyFetchTimeout = 5 * time.Second
	retryDiscovery  = 5 * time.Second
)

// NewOIDC returns the verifier of the configured provider; client (nil:
// one with a 10 s timeout) reaches it, now (nil: time.Now) is the clock.
// Nothing is fetched until the first token (or Discover).
func NewOIDC(cfg config.OIDC, client *http.Client, now func() time.Time) *OIDC {
	if client == nil {
		client = &http.Client{Timeout: providerTimeout}
	}
	if now == nil {
		now = time.Now
	}
	return &OIDC{cfg: cfg, client: client, now: now}
}

// Config returns the configuration the verifier checks against.
func (o *OIDC) Config() config.OIDC { return o.cfg }

// TokenError is why a request's credentials were refused, as RFC 6750
// names it: invalid_request (a malformed header), invalid_token (bad,
// expired, for another audience, …) or insufficient_scope. Its message
// names what was wrong and never holds the token.
type TokenError struct {
	Code        string
	Description string
	Scope       string // insufficient_scope: the scopes needed
}

func (e *TokenError) Error() string { return e.Code + ": " + e.Description }

func invalidToken(format string, args ...any) error {
	return &TokenError{Code: "invalid_token", Description: fmt.Sprintf(format, args...)}
}

// Discover reads the provider's discovery document (once it succeeds; a
// failure is tried again at most every few seconds) and returns what it
// says.
func (o *OIDC) Discover(ctx context.Context) (Provider, error) {
	_, p, err := o.discovered(ctx)
	return p, err
}

func (o *OIDC) discovered(ctx context.Context) (*oidc.IDTokenVerifier, Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, o.meta, nil
	}
	if o.failed != nil && o.now().Sub(o.tried) < retryDiscovery {
		return nil, Provider{}, o.failed
	}
	cctx := oidc.ClientContext(context.WithoutCancel(ctx), o.client)
	dctx, cancel := context.WithTimeout(cctx, providerTimeout)
	defer cancel()
	p, err := oidc.NewProvider(dctx, o.cfg.Issuer)
	if err != nil {
		o.tried, o.failed = o.now(), fmt.Errorf("the identity provider %s cannot be read: %v", o.cfg.Issuer, err)
		return nil, Provider{}, o.failed
	}
	var meta Provider
	if err := p.Claims(&meta); err != nil {
		o.tried, o.failed = o.now(), fmt.Errorf("the identity provider %s: its discovery document: %v", o.cfg.Issuer, err)
		return nil, Provider{}, o.failed
	}
	o.meta, o.failed = meta, nil
	// the key set lives as long as the verifier: refreshed every
	// refreshEvery, fetched at once for a key it does not hold, never more
	// than once per refetchEvery
	algs := make([]jose.SignatureAlgorithm, len(o.cfg.AllowedAlgs))
	for i, a := range o.cfg.AllowedAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	o.keys = &keySet{url: meta.JWKSURI, client: &http.Client{Timeout: providerTimeout, Transport: o.client.Transport}, now: o.now, algs: algs,
		removed: o.forget}
	o.verifier = oidc.NewVerifier(meta.Issuer, o.keys, &oidc.Config{ClientID: o.cfg.Audience, SupportedSigningAlgs: o.cfg.AllowedAlgs, Now: o.now})
	return o.verifier, meta, nil
}

// Close waits for a fetch of the provider's keys in flight to end (at
// most keyFetchTimeout). The verifier is not to be used after.
func (o *OIDC) Close() {
	o.mu.Lock()
	keys := o.keys
	o.mu.Unlock()
	if keys != nil {
		keys.Close()
	}
}

// forget drops the verified tokens of keys the provider no longer lists
// (and those that named no key): they are verified again, and refused.
func (o *OIDC) forget(kids []string) {
	o.cacheMu.Lock()
	defer o.cacheMu.Unlock()
	o.epoch++
	for sum, c := range o.verified {
		if c.kid == "" || slices.Contains(kids, c.kid) {
			delete(o.verified, sum)
		}
	}
}

// Verify returns the principal of an access token, or a *TokenError
// saying why it is refused (an error of another kind: the provider could
// not be reached to learn its keys).
func (o *OIDC) Verify(ctx context.Context, token string) (Principal, error) {
	if strings.Count(token, ".") != 2 {
		return Principal{}, invalidToken("not a JWT access token of the identity provider, nor a known API key")
	}
	o.mu.Lock()
	keys := o.keys
	o.mu.Unlock()
	if keys != nil {
		keys.refresh() // due every few minutes, for the tokens remembered below as much as for new ones
	}
	sum := sha256.Sum256([]byte(token))
	o.cacheMu.Lock()
	c, ok := o.verified[sum]
	epoch := o.epoch
	o.cacheMu.Unlock()
	if ok && o.now().Before(c.exp) && !o.nocache {
		c.p.Roles = slices.Clone(c.p.Roles)
		return c.p, nil
	}
	p, exp, err := o.verify(ctx, token)
	if err != nil {
		return Principal{}, err
	}
	o.cacheMu.Lock()
	if o.epoch != epoch { // keys were removed while it was verified: verified again next time
		o.cacheMu.Unlock()
		p.Roles = slices.Clone(p.Roles)
		return p, nil
	}
	if o.verified == nil {
		o.verified = map[[sha256.Size]byte]verifiedToken{}
	}
	if len(o.verified) >= maxVerified {
		for k := range o.verified { // any one: the map's order is random
			delete(o.verified, k)
			break
		}
	}
	o.verified[sum] = verifiedToken{p: p, exp: exp, kid: keyID(token)}
	o.cacheMu.Unlock()
	p.Roles = slices.Clone(p.Roles)
	return p, nil
}

// verify checks a token in full: strict JSON, signature, claims, scopes.
func (o *OIDC) verify(ctx context.Context, token string) (Principal, time.Time, error) {
	v, _, err := o.discovered(ctx)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	if err := strictToken(token); err != nil {
		return Principal{}, time.Time{}, err
	}
	vctx, cancel := context.WithTimeout(ctx, keyFetchTimeout) // a token naming a new key fetches the keys: bounded
	defer cancel()
	t, err := v.Verify(vctx, token)
	if err != nil {
		return Principal{}, time.Time{}, refusal(err)
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return Principal{}, time.Time{}, invalidToken("its claims cannot be read: %v", err)
	}
	user, _ := claimAt(claims, o.cfg.UserClaim).(string)
	if user == "" || len(user) > 256 || !utf8.ValidString(user) || strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Principal{}, time.Time{}, invalidToken("claim %s (the user) is missing or not a usable id", o.cfg.UserClaim)
	}
	p := Principal{ID: Namespaced(o.cfg.Issuer, user)}
	if o.cfg.RolesClaim != "" {
		p.Roles = words(claimAt(claims, o.cfg.RolesClaim))
	}
	if len(o.cfg.RequiredScopes) > 0 {
		have := words(claims["scope"])
		if len(have) == 0 {
			have = words(claims["scp"])
		}
		for _, s := range o.cfg.RequiredScopes {
			if !slices.Contains(have, s) {
				return Principal{}, time.Time{}, &TokenError{Code: "insufficient_scope", Description: fmt.Sprintf("the token lacks scope %q", s), Scope: strings.Join(o.cfg.RequiredScopes, " ")}
			}
		}
	}
	return p, t.Expiry, nil
}

// Namespaced is the principal id of a provider's user: the issuer, "#",
// and the user claim. Principals are namespaced by where they come from,
// so none can stand for another: an API key's user id has no "#" (the
// configuration refuses one) and is never "local" (the terminal's), and
// an issuer has no fragment, so a provider's "alice" is not the API key's
// alice, nor another provider's, and its "local" is not the terminal.
func Namespaced(issuer, user string) string { return issuer + "#" + user }

// strictToken checks a compact JWT's header and claims as the API checks
// a body (canonjson: a member name that repeats or differs only in
// letter case, invalid UTF-8, a lone surrogate, a number out of range,
// nesting past the limit): a signed token with two "sub" members is
// refused, not read as whichever one a JSON library keeps.
func strictToken(token string) error {
	parts := strings.SplitN(token, ".", 3)
	for i, what := range []string{"header is", "claims are"} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return invalidToken("the token is malformed: its %s not base64url", what)
		}
		if err := canonjson.Check(raw); err != nil {
			return invalidToken("the token's %s not strict JSON: %v", what, err)
		}
	}
	return nil
}

// keyID returns the key id a verified token's header names ("" for none).
func keyID(token string) string {
	head, _, _ := strings.Cut(token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(head)
	var h struct {
		Kid string `json:"kid"`
	}
	json.Unmarshal(raw, &h)
	return h.Kid
}

// refusal says why go-oidc refused a token, without quoting it.
func refusal(err error) error {
	var expired *oidc.TokenExpiredError
	switch msg := err.Error(); {
	case errors.As(err, &expired):
		return invalidToken("the token expired at %s", expired.Expiry.UTC().Format(time.RFC3339))
	case strings.Contains(msg, "expected audience"):
		return invalidToken("the token is for another audience (resource)")
	case strings.Contains(msg, "issued by a different provider"):
		return invalidToken("the token was issued by another provider")
	case strings.Contains(msg, "before the nbf"):
		return invalidToken("the token is not valid yet (nbf)")
	case strings.Contains(msg, "unexpected signature algorithm") || strings.Contains(msg, "unsupported") || strings.Contains(msg, "signing algorithm"):
		return invalidToken("the token's signature algorithm is not accepted")
	case strings.Contains(msg, "fetching keys"):
		return fmt.Errorf("the identity provider's keys cannot be read: %v", err)
	case strings.Contains(msg, "signature"):
		return invalidToken("the token's signature does not verify with the provider's keys")
	case strings.Contains(msg, "malformed") || strings.Contains(msg, "parse") || strings.Contains(msg, "decode"):
		return invalidToken("the token is malformed")
	default:
		return invalidToken("the token is refused: %s", strings.TrimPrefix(msg, "oidc: "))
	}
}

// claimAt reads a claim by a dotted path (realm_access.roles).
func claimAt(claims map[string]any, path string) any {
	var v any = claims
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// words reads a claim that is a list of strings, or one string of
// space-separated words (scope).
func words(v any) []string {
	switch x := v.(type) {
	case string:
		return strings.Fields(x)
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Exchange trades an authorization code for tokens at the provider's
// token endpoint, as the web page's public client (PKCE: the verifier,
// no secret), asking for this server's audience (RFC 8707), and returns
// the access token with its principal, verified.
func (o *OIDC) Exchange(ctx context.Context, code, verifier, redirectURI string) (token string, expiresIn int, p Principal, err error) {
	_, meta, err := o.discovered(ctx)
	if err != nil {
		return "", 0, Principal{}, err
	}
	form := map[string][]string{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {redirectURI}, "client_id": {o.cfg.ClientID}, "resource": {o.cfg.Audience}}
	resp, err := o.client.PostForm(meta.TokenEndpoint, form)
	if err != nil {
		return "", 0, Principal{}, fmt.Errorf("the identity provider's token endpoint cannot be reached: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", 0, Principal{}, fmt.Errorf("the identity provider's token endpoint answered %s, not JSON", resp.Status)
	}
	if resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return "", 0, Principal{}, &TokenError{Code: "invalid_request", Description: fmt.Sprintf("the identity provider refused the code: %s %s", out.Error, out.Description)}
	}
	p, err = o.Verify(ctx, out.AccessToken)
	return out.AccessToken, out.ExpiresIn, p, err
}

// Authenticator says who a request acts for: the principal of an API key,
// else of an access token of the identity provider. With neither keys
// nor a provider configured, everyone is Local.
type Authenticator struct {
	Keys *Keys
	OIDC *OIDC // nil: no identity provider
}

// Open reports whether the server has no credentials at all (everyone is
// Local; it must bind to loopback only).
func (a *Authenticator) Open() bool { return a.Keys.Len() == 0 && a.OIDC == nil }

// Authenticate returns the principal of an Authorization header. A
// refusal has code unauthorized and, with a provider, wraps a *TokenError
// for the WWW-Authenticate challenge; a provider that cannot be reached
// is source_unavailable. No error quotes the credentials.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	if a.OIDC == nil {
		return a.Keys.Authenticate(header)
	}
	if header == "" {
		return Principal{}, agentplane.Errorf(agentplane.CodeUnauthorized, "missing credentials: send Authorization: Bearer TOKEN (an access token of %s, or an API key)", a.OIDC.cfg.Issuer)
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		te := &TokenError{Code: "invalid_request", Description: `the Authorization header is not "Bearer TOKEN"`}
		return Principal{}, fmt.Errorf("%w%w", agentplane.Errorf(agentplane.CodeUnauthorized, "%s", te.Description), te)
	}
	if a.Keys.Len() > 0 {
		if p, err := a.Keys.Authenticate(header); err == nil {
			return p, nil
		}
	}
	p, err := a.OIDC.Verify(ctx, token)
	var te *TokenError
	switch {
	case errors.As(err, &te):
		return Principal{}, fmt.Errorf("%w%w", agentplane.Errorf(agentplane.CodeUnauthorized, "%s", te.Description), te)
	case err != nil:
		return Principal{}, agentplane.Errorf(agentplane.CodeSourceUnavailable, "%v", err)
	}
	return p, nil
}
