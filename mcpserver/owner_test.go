package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
)

// rawMCP sends one JSON-RPC message to the handler as the principal, in
// the MCP session (none: a new one), and returns the status, the session
// id answered and the body.
func rawMCP(h http.Handler, who, session, msg string) (int, string, string) {
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(msg))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		r.Header.Set("Mcp-Session-Id", session)
		r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	r = r.WithContext(auth.With(r.Context(), auth.Principal{ID: who}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Header().Get("Mcp-Session-Id"), w.Body.String()
}

// initialize opens an MCP session as the principal without ever sending
// notifications/initialized (the SDK does not require it).
func initialize(t *testing.T, h http.Handler, who string) string {
	t.Helper()
	st, id, body := rawMCP(h, who, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if st != 200 || id == "" {
		t.Fatalf("initialize as %s: %d %s", who, st, body)
	}
	return id
}

func deleteSession(h http.Handler, who, session string) int {
	r := httptest.NewRequest("DELETE", "/mcp", nil)
	r.Header.Set("Mcp-Session-Id", session)
	r = r.WithContext(auth.With(r.Context(), auth.Principal{ID: who}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

const listTools = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// An MCP session whose client never sent notifications/initialized, kept
// in use for hours while other sessions come and go, stays its opener's:
// another principal presenting its id is refused every time (the owner
// was forgotten after 31 minutes, and then anyone holding the id listed
// and called tools as the opener). Time is the bubble's.
func TestSessionOwnerLivesAsLongAsTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := demotest.Runtime(t, plane.Options{})
		ms := mcpserver.New(rt, nil)
		t.Cleanup(ms.Close)
		h := ms.Handler()
		alice := initialize(t, h, "alice")
		var others []string
		t.Cleanup(func() { // every session ends, so the bubble's goroutines do, pass or fail
			deleteSession(h, "alice", alice)
			for _, id := range others {
				deleteSession(h, "carol", id)
			}
		})
		for step := range 36 { // three hours, a request every five minutes
			time.Sleep(5 * time.Minute)
			if st, _, body := rawMCP(h, "alice", alice, listTools); st != 200 || !strings.Contains(body, "agent_list_modes") {
				t.Fatalf("%v in: alice's own session answered %d %s", time.Duration(step+1)*5*time.Minute, st, body)
			}
			others = append(others, initialize(t, h, "carol")) // another client comes (and sweeps what has ended)
			if st, _, body := rawMCP(h, "bob", alice, listTools); st != http.StatusNotFound {
				t.Fatalf("%v in: bob presenting alice's session id got %d %s", time.Duration(step+1)*5*time.Minute, st, body)
			}
			call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"agent_set_mode","arguments":{"mode":"sales"}}}`
			if st, _, _ := rawMCP(h, "bob", alice, call); st != http.StatusNotFound {
				t.Fatalf("bob called a tool in alice's session: %d", st)
			}
		}
		// an id this server never made is unknown to everyone
		if st, _, _ := rawMCP(h, "alice", "made-up", listTools); st != http.StatusNotFound {
			t.Fatalf("a made-up id: %d", st)
		}
		// once alice ends it, the id is nobody's: not even hers
		if st := deleteSession(h, "bob", alice); st != http.StatusNotFound {
			t.Fatalf("bob deleted alice's session: %d", st)
		}
		if st := deleteSession(h, "alice", alice); st != http.StatusNoContent {
			t.Fatalf("alice could not delete her session: %d", st)
		}
		if st, _, _ := rawMCP(h, "alice", alice, listTools); st != http.StatusNotFound {
			t.Fatalf("an ended session answered: %d", st)
		}
	})
}

// A principal holds at most SessionsPerPrincipal MCP sessions: the next
// initialize is 429 naming the cap, other principals are not affected,
// and ending one makes room.
func TestSessionsPerPrincipal(t *testing.T) {
	rt := demotest.Runtime(t, plane.Options{})
	s := mcpserver.New(rt, &mcpserver.Options{SessionsPerPrincipal: 3})
	t.Cleanup(s.Close)
	h := s.Handler()
	var ids []string
	for range 3 {
		ids = append(ids, initialize(t, h, "alice"))
	}
	st, _, body := rawMCP(h, "alice", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if st != http.StatusTooManyRequests || !strings.Contains(body, "holds 3, the cap") || !strings.Contains(body, "--max-mcp-sessions") {
		t.Fatalf("a fourth session: %d %s", st, body)
	}
	// initialize requests that fail (answered with a JSON-RPC error) open
	// nothing and do not count
	for range 5 {
		if _, id, body := rawMCP(h, "bob", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":"nonsense"}`); !strings.Contains(body, `"error"`) {
			t.Fatalf("a broken initialize: %s %s", id, body)
		}
	}
	for range 3 {
		initialize(t, h, "bob")
	}
	if deleteSession(h, "alice", ids[0]) != http.StatusNoContent {
		t.Fatal("delete")
	}
	initialize(t, h, "alice")
	if n := s.Sessions(); n != 6 {
		t.Fatalf("%d sessions bound, want 6", n)
	}
}

// Everything an MCP session lists and reads is marked private to its
// principal, with no time to live: its state, its audit chain, the
// catalogs and providers active for its mode and roles, and the lists.
func TestCacheHintsArePrivate(t *testing.T) {
	e := newEnv(t)
	var seen []string
	cs, _ := e.connect(t, nil)
	call(t, cs, "agent_set_mode", `{"mode": "sales"}`)
	check := func(what string, c mcp.Cacheable, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if c.CacheScope != "private" || c.TTLMs != 0 {
			t.Errorf("%s: cache scope %q, ttl %d ms", what, c.CacheScope, c.TTLMs)
		}
		seen = append(seen, what)
	}
	ctx := context.Background()
	tl, err := cs.ListTools(ctx, nil)
	check("tools/list", tl.Cacheable, err)
	rl, err := cs.ListResources(ctx, nil)
	check("resources/list", rl.Cacheable, err)
	tpl, err := cs.ListResourceTemplates(ctx, nil)
	check("resources/templates/list", tpl.Cacheable, err)
	pl, err := cs.ListPrompts(ctx, nil)
	check("prompts/list", pl.Cacheable, err)
	uris := []string{mcpserver.URISession, mcpserver.URIContext, mcpserver.URIAudit, mcpserver.URIAudit + "?before=2"}
	for _, r := range rl.Resources {
		if strings.HasPrefix(r.URI, "agentplane://catalogs/") || strings.HasPrefix(r.URI, "agentplane://providers/") {
			uris = append(uris, r.URI)
		}
	}
	if len(uris) < 6 {
		t.Fatalf("resources listed: %v", rl.Resources)
	}
	for _, uri := range uris {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err == nil && len(res.Contents) == 0 {
			err = fmt.Errorf("no contents")
		}
		check("resources/read "+uri, res.Cacheable, err)
	}
	raw, _ := json.Marshal(seen)
	t.Logf("checked %s", raw)
}
