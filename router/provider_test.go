package router_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/registry"
)

// TestHTTPCatalogProvider routes against a catalog served over HTTP: items
// are fetched once per TTL, and a failing provider yields a clear trace and
// continue_with_llm, never a crash.
func TestHTTPCatalogProvider(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var hits atomic.Int32
	up.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !up.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`[{"id":"LIST-9","display_name":"Q1 pilot list"},{"id":"LIST-10","display_name":"Enterprise CFOs"}]`))
	}))
	t.Cleanup(srv.Close)
	yaml := `version: 1
modes: [{key: general, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [lists], commands: [pick_list]}]
catalogs: [{id: lists, entity_type: mailer_list, provider: {http: {url: "` + srv.URL + `"}}, ttl_seconds: 60}]
commands:
  - {id: pick_list, tool: agent_set_active_entity, parameter: list, resolver: {catalog: lists}, sets_active_context: true,
     triggers: ["use [the] {item} [list]"]}
`
	cfg, err := config.Parse([]byte(yaml), "p.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := now
	reg, err := compile(cfg, &registry.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	sess := sessionIn("general")
	route := func(text string) agentplane.Decision {
		d, err := reg.Route(context.Background(), sess, agentplane.TurnInput{Text: text, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := route("use the q1 pilot list"); d.Action != agentplane.ActionInvokeCommand || d.ResolvedID != "LIST-9" {
		t.Fatalf("provider items: %+v", d)
	}
	route("use enterprise cfos")
	if hits.Load() != 1 {
		t.Fatalf("%d fetches within the TTL", hits.Load())
	}
	// a failing refresh keeps the last good items, and says so
	up.Store(false)
	clock = clock.Add(2 * time.Minute)
	d := route("use the q1 pilot list")
	if d.ResolvedID != "LIST-9" || !strings.Contains(strings.Join(d.Trace, "\n"), "serving cached items: refresh failed") {
		t.Fatalf("stale serving: %+v", d)
	}
	// a provider that never answered gives continue_with_llm with a clear trace
	reg2, _ := compile(cfg, &registry.Options{Now: func() time.Time { return clock }})
	d, err = reg2.Route(context.Background(), sess, agentplane.TurnInput{Text: "use the q1 pilot list", Now: clock})
	if err != nil || d.Action != agentplane.ActionContinueLLM || d.ReasonCode != agentplane.ReasonSourceUnavailable {
		t.Fatalf("down provider: %+v %v", d, err)
	}
	if tr := strings.Join(d.Trace, "\n"); !strings.Contains(tr, "status 503") || !strings.Contains(tr, "catalog:lists") {
		t.Fatalf("trace does not say what failed:\n%s", tr)
	}
}
