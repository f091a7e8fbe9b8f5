package httpapi_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/testkit/oidctest"
	"github.com/agentplane/agentplane/workflow"
)

// testAudience is the resource identifier the test servers take tokens for.
const testAudience = "https://agentplane.test/mcp"

// raw sends a request with an Authorization header and returns the
// status, the WWW-Authenticate header and the body.
func (e *env) raw(method, path, authz string, body string) (int, string, string) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// Tokens of the provider are accepted beside the API keys; every bad one
// is a 401 saying why in WWW-Authenticate, pointing at the resource
// metadata, never a 500.
func TestBearerTokensFromTheProvider(t *testing.T) {
	p := oidctest.New(t)
	key := "alice-key-0123456789"
	e := newEnv(t, &envOptions{oidc: p, keys: map[string]string{key: "alice"}})
	good := map[string]any{"sub": "carol", "aud": testAudience, "roles": []any{"ops"}}
	tok := p.Token(good)
	st, _, body := e.raw("POST", "/v1/sessions", "Bearer "+tok, "{}")
	if st != 201 {
		t.Fatalf("a good token: %d %s", st, body)
	}
	var created httpapi.SessionCreated
	json.Unmarshal([]byte(body), &created)
	sess, _ := e.core.Session(context.Background(), created.SessionID)
	if sess.Owner != auth.Namespaced(p.URL, "carol") {
		t.Fatalf("the session belongs to %q", sess.Owner)
	}
	// the API key still works, and does not see carol's session
	if st, _, _ := e.raw("GET", "/v1/sessions/"+created.SessionID, "Bearer "+key, ""); st != 404 {
		t.Fatalf("alice reads carol's session: %d", st)
	}
	with := func(k string, v any) map[string]any { return oidctest.With(good, k, v) }
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	parts := strings.Split(p.Token(good), ".")
	meta := `resource_metadata="` + e.srv.URL + `/.well-known/oauth-protected-resource"`
	for name, c := range map[string]struct{ authz, want string }{
		"no credentials":  {"", ""},
		"expired":         {"Bearer " + p.Token(with("exp", time.Now().Add(-time.Hour).Unix())), `error="invalid_token", error_description="the token expired at `},
		"other audience":  {"Bearer " + p.Token(with("aud", "https://other.example/mcp")), `another audience`},
		"unknown key id":  {"Bearer " + p.SignWith(stranger, "k42", jose.RS256, good), `signature does not verify`},
		"alg none":        {"Bearer " + p.Unsigned(good), `algorithm is not accepted`},
		"tampered":        {"Bearer " + parts[0] + "." + parts[1] + "e30." + parts[2], `error="invalid_token"`},
		"not a token":     {"Bearer not-a-key-and-not-a-jwt", `not a JWT access token`},
		"basic":           {"Basic YWxpY2U6eA==", `error="invalid_request"`},
		"other issuer":    {"Bearer " + p.Token(with("iss", "https://evil.example")), `another provider`},
		"not before":      {"Bearer " + p.Token(with("nbf", time.Now().Add(time.Hour).Unix())), `not valid yet`},
		"quote in claims": {"Bearer " + p.Token(with("sub", "")), `claim sub`},
	} {
		st, challenge, body := e.raw("GET", "/v1/sessions", c.authz, "")
		if st != 401 || !strings.Contains(challenge, meta) || !strings.Contains(challenge, c.want) || !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("%s: %d, WWW-Authenticate %s, body %s; want 401 with %q", name, st, challenge, body, c.want)
		}
		if name == "no credentials" && strings.Contains(challenge, "error=") {
			t.Errorf("no credentials: the challenge names an error: %s", challenge)
		}
	}
	// the protected resource metadata, at both places
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		var m httpapi.ResourceMetadata
		if st := e.call("GET", path, "", nil, &m); st != 200 || m.Resource != testAudience || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != p.URL {
			t.Fatalf("%s: %d %+v", path, st, m)
		}
	}
}

// Where scopes are required, a token without them is 403
// insufficient_scope naming them.
func TestRequiredScopes(t *testing.T) {
	p := oidctest.New(t)
	e := newEnv(t, &envOptions{oidc: p, scopes: []string{"agentplane"}})
	st, challenge, _ := e.raw("GET", "/v1/sessions", "Bearer "+p.Token(map[string]any{"sub": "carol", "aud": testAudience, "scope": "openid"}), "")
	if st != 403 || !strings.Contains(challenge, `error="insufficient_scope"`) || !strings.Contains(challenge, `scope="agentplane"`) {
		t.Fatalf("without the scope: %d %s", st, challenge)
	}
	if st, _, body := e.raw("GET", "/v1/sessions", "Bearer "+p.Token(map[string]any{"sub": "carol", "aud": testAudience, "scope": "openid agentplane"}), ""); st != 200 {
		t.Fatalf("with the scope: %d %s", st, body)
	}
}

// MCP behind the provider: a client without a token learns where to get
// one; with one it works; the token never reaches a tool's service.
func TestMCPWithTokens(t *testing.T) {
	p := oidctest.New(t)
	var mu sync.Mutex
	var seen []string // Authorization headers the tool's service got
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": true}`)
	}))
	defer svc.Close()
	e := newEnv(t, &envOptions{oidc: p, edit: func(y string) string {
		const core = "    tools: [agent_list_modes, agent_get_context, agent_set_mode]\n"
		if !strings.Contains(y, core) {
			t.Fatal("the demo configuration changed: no core toolbox")
		}
		y = strings.Replace(y, core, "    tools: [agent_list_modes, agent_get_context, agent_set_mode, peek]\n", 1)
		return y + "  - {name: peek, description: Looks at a service., impact: read, http: {url: \"" + svc.URL + "\", headers: {X-Service: agentplane}}}\n"
	}})
	st, challenge, _ := e.raw("POST", "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if st != 401 || !strings.Contains(challenge, `resource_metadata="`+e.srv.URL+`/.well-known/oauth-protected-resource"`) {
		t.Fatalf("MCP without a token: %d %s", st, challenge)
	}
	tok := p.Token(map[string]any{"sub": "carol", "aud": testAudience})
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "peek", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("peek: %v %+v", err, res)
	}
	// and through the API
	var created httpapi.SessionCreated
	_, _, body := e.raw("POST", "/v1/sessions", "Bearer "+tok, "{}")
	json.Unmarshal([]byte(body), &created)
	if st, _, body := e.raw("POST", "/v1/sessions/"+created.SessionID+"/intents", "Bearer "+tok, `{"type":"action_call","action":"peek","args":{}}`); st != 200 {
		t.Fatalf("peek through the API: %d %s", st, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the service got %d calls", len(seen))
	}
	for _, h := range seen {
		if strings.Contains(h, tok) || h != "" {
			t.Fatalf("the client's credentials reached the tool's service: %q", h)
		}
	}
}

// The page's sign-in: what /v1/auth offers, and a code traded for a
// verified token (PKCE), refused when the verifier is wrong.
func TestSignInWithPKCE(t *testing.T) {
	p := oidctest.New(t)
	e := newEnv(t, &envOptions{oidc: p})
	var si httpapi.SignIn
	if st := e.call("GET", "/v1/auth", "", nil, &si); st != 200 || si.APIKeys || si.OIDC == nil || si.OIDC.ClientID != "agentplane-page" ||
		si.OIDC.AuthorizationEndpoint != p.URL+"/authorize" || si.OIDC.Resource != testAudience {
		t.Fatalf("sign-in: %d %+v", st, si.OIDC)
	}
	verifier := strings.Repeat("v", 50)
	sum := sha256.Sum256([]byte(verifier))
	redirect := e.srv.URL + "/"
	code := func() string {
		q := url.Values{"response_type": {"code"}, "client_id": {"agentplane-page"}, "redirect_uri": {redirect}, "scope": {"openid agentplane"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "state": {"s1"}, "resource": {testAudience}}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Get(si.OIDC.AuthorizationEndpoint + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		return loc.Query().Get("code")
	}
	body, _ := json.Marshal(httpapi.TokenRequest{Code: code(), CodeVerifier: strings.Repeat("w", 50), RedirectURI: redirect})
	if st, _, b := e.raw("POST", "/v1/auth/token", "", string(body)); st != 401 || !strings.Contains(b, "refused the code") {
		t.Fatalf("a wrong verifier: %d %s", st, b)
	}
	// a page on another site posting a code is refused before the provider is asked
	body, _ = json.Marshal(httpapi.TokenRequest{Code: code(), CodeVerifier: verifier, RedirectURI: redirect})
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/auth/token", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := e.srv.Client().Do(req)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("a cross-site code: %v %v", resp, err)
	}
	resp.Body.Close() // its connection's goroutines outlived the test (goleak)
	// the same code, from the page itself: not used up by the refused request
	st, _, b := e.raw("POST", "/v1/auth/token", "", string(body))
	var ta httpapi.TokenAnswer
	if json.Unmarshal([]byte(b), &ta); st != 200 || ta.UserID != auth.Namespaced(p.URL, "carol") || ta.AccessToken == "" {
		t.Fatalf("the code: %d %s", st, b)
	}
	if st, _, _ := e.raw("GET", "/v1/sessions", "Bearer "+ta.AccessToken, ""); st != 200 {
		t.Fatalf("the page's token: %d", st)
	}
	for name, c := range map[string]struct{ body, want string }{
		"short verifier": {`{"code":"x","code_verifier":"short","redirect_uri":"` + redirect + `"}`, "code_verifier"},
		"other site":     {`{"code":"x","code_verifier":"` + verifier + `","redirect_uri":"https://evil.example/"}`, "redirect_uri"},
		"no code":        {`{"code":"","code_verifier":"` + verifier + `","redirect_uri":"` + redirect + `"}`, "code"},
	} {
		if st, _, b := e.raw("POST", "/v1/auth/token", "", c.body); st != 400 || !strings.Contains(b, c.want) {
			t.Errorf("%s: %d %s", name, st, b)
		}
	}
}

// BenchmarkTurnAuth times HTTP turns authenticated by an API key and by
// an access token of the provider, interleaved on one server (memory
// store), and reports each one's p50.
func BenchmarkTurnAuth(b *testing.B) {
	p := oidctest.New(b)
	key := "alice-key-0123456789"
	e := newEnv(b, &envOptions{oidc: p, keys: map[string]string{key: "alice"}})
	creds := map[string]string{"key": "Bearer " + key, "oidc": "Bearer " + p.Token(map[string]any{"sub": "carol", "aud": testAudience})}
	sessions := map[string]string{}
	for kind, authz := range creds {
		_, _, body := e.raw("POST", "/v1/sessions", authz, "{}")
		var c httpapi.SessionCreated
		json.Unmarshal([]byte(body), &c)
		sessions[kind] = c.SessionID
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	turn := func(kind string, i int) time.Duration {
		text := []string{`{"text":"switch to ddr mode"}`, `{"text":"switch to general mode"}`}[i%2]
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/sessions/"+sessions[kind]+"/turns", strings.NewReader(text))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", creds[kind])
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", kind, resp.StatusCode)
		}
		return time.Since(start)
	}
	lat := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		for _, kind := range []string{"key", "oidc"} {
			lat[kind] = append(lat[kind], turn(kind, i))
		}
		i++
	}
	for kind, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-"+kind+"-µs")
	}
}

// TestPrincipalsAreNamespacedBySource: a provider's user is not the API
// key's user of the same name, nor the terminal's principal: a token whose
// user claim is "alice" reads none of the API key alice's sessions, and
// one whose claim is "local" none of the terminal's sessions or
// workflows. (Both read them: principals of every source shared one
// namespace.)
func TestPrincipalsAreNamespacedBySource(t *testing.T) {
	p := oidctest.New(t)
	key := "alice-key-0123456789"
	e := newEnv(t, &envOptions{oidc: p, keys: map[string]string{key: "alice"}})
	ctx := context.Background()
	st, _, body := e.raw("POST", "/v1/sessions", "Bearer "+key, "{}")
	var keyed httpapi.SessionCreated
	if json.Unmarshal([]byte(body), &keyed); st != 201 {
		t.Fatalf("the key's session: %d %s", st, body)
	}
	terminal, err := e.core.Start(ctx, core.Start{Principal: agentplane.LocalPrincipal})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.wf.Start(ctx, workflow.Start{SessionID: terminal.ID, Principal: agentplane.LocalPrincipal, Definition: &workflow.Definition{Tasks: []workflow.Task{{ID: "a", Tool: "catalog_search", Args: map[string]any{"query": "x"}}}}}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", agentplane.LocalPrincipal} {
		tok := "Bearer " + p.Token(map[string]any{"sub": user, "aud": testAudience})
		for _, id := range []string{keyed.SessionID, terminal.ID} {
			for _, path := range []string{"", "/audit", "/history"} {
				if st, _, body := e.raw("GET", "/v1/sessions/"+id+path, tok, ""); st != 404 {
					t.Errorf("the provider's %q reads session %s%s: %d %s", user, id, path, st, body)
				}
			}
		}
		for _, path := range []string{"/v1/sessions", "/v1/workflows"} {
			st, _, body := e.raw("GET", path, tok, "")
			if st != 200 || strings.Contains(body, keyed.SessionID) || strings.Contains(body, terminal.ID) {
				t.Errorf("the provider's %q lists another source's: GET %s %d %s", user, path, st, body)
			}
		}
	}
}
