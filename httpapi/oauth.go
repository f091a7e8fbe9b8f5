package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
)

// The server as an OAuth 2.1 resource server (the MCP authorization
// specification): its protected resource metadata (RFC 9728) names the
// identity provider, every 401 points at it, and the web page signs in
// through the provider as a public client (authorization code with PKCE).

// metadataPath is where the protected resource metadata is served.
const metadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the protected resource metadata (RFC 9728).
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
}

func (s *Server) getResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if s.auth.OIDC == nil {
		s.writeError(w, r, agentplane.Errorf(agentplane.CodeNotFound, "this server has no identity provider (auth.oidc): it takes API keys only"))
		return
	}
	c := s.auth.OIDC.Config()
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, http.StatusOK, ResourceMetadata{Resource: c.Audience, AuthorizationServers: []string{c.Issuer}, ScopesSupported: c.RequiredScopes,
		BearerMethodsSupported: []string{"header"}, ResourceName: "agentplane"})
}

// baseURL is the URL the client reached this server by.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// challenge is the WWW-Authenticate header of a refusal: the realm, the
// resource metadata when there is a provider, and the refusal's error and
// description (RFC 6750 §3).
func (s *Server) challenge(r *http.Request, err error) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="agentplane"`)
	if s.auth.OIDC != nil {
		fmt.Fprintf(&b, `, resource_metadata=%q`, baseURL(r)+metadataPath)
	}
	var te *auth.TokenError
	if errors.As(err, &te) {
		fmt.Fprintf(&b, `, error=%q, error_description=%q`, te.Code, quotable(te.Description))
		if te.Scope != "" {
			fmt.Fprintf(&b, `, scope=%q`, te.Scope)
		}
	}
	return b.String()
}

// quotable keeps what RFC 6750 allows in error_description: printable
// ASCII other than " and \.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}

// SignIn is how the web page may sign in: with an API key, through the
// identity provider, or both.
type SignIn struct {
	APIKeys bool        `json:"api_keys"`
	OIDC    *SignInOIDC `json:"oidc,omitempty"`
}

// SignInOIDC is what the page needs to send a person to the provider:
// its authorization endpoint, the public client and what to ask for.
type SignInOIDC struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	ClientID              string   `json:"client_id"`
	Scopes                []string `json:"scopes"`
	Resource              string   `json:"resource"`
}

func (s *Server) getSignIn(w http.ResponseWriter, r *http.Request) {
	out := SignIn{APIKeys: s.keys.Len() > 0}
	if s.auth.OIDC != nil && s.auth.OIDC.Config().ClientID != "" {
		p, err := s.auth.OIDC.Discover(r.Context())
		if err != nil {
			s.writeError(w, r, agentplane.Errorf(agentplane.CodeSourceUnavailable, "%v", err))
			return
		}
		c := s.auth.OIDC.Config()
		out.OIDC = &SignInOIDC{Issuer: c.Issuer, AuthorizationEndpoint: p.AuthorizationEndpoint, ClientID: c.ClientID, Scopes: c.Scopes, Resource: c.Audience}
	}
	writeJSON(w, http.StatusOK, out)
}

// TokenRequest is the page's authorization code, to trade for a token.
type TokenRequest struct {
	Code         string `json:"code"`
	CodeVerifier string `json:"code_verifier"`
	RedirectURI  string `json:"redirect_uri"`
}

// TokenAnswer is the access token the page uses as its bearer token.
type TokenAnswer struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in,omitempty"`
	UserID      string `json:"user_id"`
}

// postToken trades the page's code at the provider's token endpoint. The
// page is a public client — it holds no secret, PKCE binds the code to
// it — and the server makes the call so that the page's Content Security
// Policy stays its own origin only; the token is verified before it is
// handed back. Anyone may post a code, so the exchanges that reach the
// provider are rate-limited, server-wide (tokenRate a second).
func (s *Server) postToken(w http.ResponseWriter, r *http.Request) {
	if s.auth.OIDC == nil || s.auth.OIDC.Config().ClientID == "" {
		s.writeError(w, r, agentplane.Errorf(agentplane.CodeNotFound, "this server signs no one in through an identity provider (auth.oidc.client_id)"))
		return
	}
	var in TokenRequest
	if err := decode(r, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch u, err := url.Parse(in.RedirectURI); {
	case in.Code == "" || len(in.Code) > 4096:
		s.writeError(w, r, invalid("code: missing or over 4096 bytes"))
		return
	case len(in.CodeVerifier) < 43 || len(in.CodeVerifier) > 128:
		s.writeError(w, r, invalid("code_verifier: want 43 to 128 characters (RFC 7636)"))
		return
	case err != nil || u.Scheme+"://"+u.Host != baseURL(r) && r.Header.Get("Origin") != u.Scheme+"://"+u.Host:
		s.writeError(w, r, invalid("redirect_uri %q: want this server's own page", truncate(in.RedirectURI, 100)))
		return
	}
	if !s.limits.token.Allow() { // anyone may post here, and each one reaches the provider
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, agentplane.Errorf(agentplane.CodeTooManyRequests,
			"too many sign-ins at once: at most %d code exchanges a second reach the identity provider; try again in a second", tokenRate))
		return
	}
	token, expires, p, err := s.auth.OIDC.Exchange(r.Context(), in.Code, in.CodeVerifier, in.RedirectURI)
	var te *auth.TokenError
	switch {
	case errors.As(err, &te):
		s.writeError(w, r, fmt.Errorf("%w%w", agentplane.Errorf(agentplane.CodeUnauthorized, "%s", te.Description), te))
		return
	case err != nil:
		s.writeError(w, r, agentplane.Errorf(agentplane.CodeSourceUnavailable, "%v", err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, TokenAnswer{AccessToken: token, ExpiresIn: expires, UserID: p.ID})
}
