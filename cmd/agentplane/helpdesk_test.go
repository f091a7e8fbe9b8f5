package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/internal/testkit/testenv"
)

// helpdesk is the example tool service (examples/helpdesk/service.py)
// running on a free port.
type helpdesk struct {
	url, token string
}

// startHelpdesk runs the example's Python service; it is killed when the
// test ends. Without python3 the test is skipped, saying so, unless the
// environment requires it (AGENTPLANE_REQUIRE_PYTHON, as CI does).
func startHelpdesk(t *testing.T) helpdesk {
	t.Helper()
	py := testenv.Python()
	if py == "" {
		if os.Getenv(testenv.RequirePythonVar) != "" {
			t.Fatalf("python3 is not on PATH and %s is set", testenv.RequirePythonVar)
		}
		t.Skip("python3 is not on PATH: the Python tool service example is not tested (apt-get install python3)")
	}
	h := helpdesk{token: exampleEnv["DESK_TOKEN"]}
	cmd := exec.Command(py, "../../examples/helpdesk/service.py", "--port", "0")
	cmd.Env = append(os.Environ(), "DESK_TOKEN="+h.token)
	sc, _, _ := servetest.StartProcess(t, cmd)
	const prefix = "helpdesk: listening on "
	if !strings.HasPrefix(sc.Text(), prefix) {
		t.Fatalf("the service printed %q", sc.Text())
	}
	h.url = strings.TrimPrefix(sc.Text(), prefix)
	return h
}

// log is what the service's tools did.
func (h helpdesk) log(t *testing.T) []map[string]any {
	t.Helper()
	st, raw := servetest.Call(t, "GET", h.url+"/log", "", "", "X-Desk-Token", h.token)
	var entries []map[string]any
	if st != 200 || json.Unmarshal(raw, &entries) != nil {
		t.Fatalf("log: %d %s", st, raw)
	}
	return entries
}

// TestHelpdeskExample runs the example in another language end to end:
// serve on the example's configuration (copied, pointed at the service)
// with the Python service behind its tools and its ticket catalog. The
// service gets its key from the environment (headers_env), answers each
// person with their own tickets, acts on the ticket the person has open,
// checks roles itself and answers an idempotency key once; eight clients
// confirming one assignment assign once.
func TestHelpdeskExample(t *testing.T) {
	t.Parallel()
	desk := startHelpdesk(t)
	bin := servetest.Binary(t)
	raw, err := os.ReadFile("../../examples/helpdesk/agentplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "http://127.0.0.1:8765/") {
		t.Fatal("the example configuration no longer points at http://127.0.0.1:8765/")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agentplane.yaml")
	os.WriteFile(cfg, []byte(strings.ReplaceAll(string(raw), "http://127.0.0.1:8765/", desk.url+"/")), 0o644)
	keys := map[string]string{"dana": exampleEnv["DESK_KEY_DANA"], "walter": exampleEnv["DESK_KEY_WALTER"]}
	var env []string
	for k, v := range exampleEnv {
		env = append(env, k+"="+v)
	}
	srv := servetest.ServeEnv(t, bin, cfg, env, "--db", filepath.Join(dir, "a.db"))

	type answer struct {
		Decision struct {
			Action     string `json:"action"`
			ResolvedID string `json:"resolved_id"`
		} `json:"decision"`
		Result *struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"result"`
		ConfirmIntent json.RawMessage `json:"confirm_intent"`
		raw           string
	}
	session := func(who string) string {
		st, raw := servetest.Call(t, "POST", srv.URL+"/v1/sessions", keys[who], `{}`)
		var created struct {
			SessionID string `json:"session_id"`
		}
		if st != 201 || json.Unmarshal(raw, &created) != nil {
			t.Fatalf("%s: create session: %d %s", who, st, raw)
		}
		return created.SessionID
	}
	turn := func(who, session, text string) answer {
		t.Helper()
		st, raw := servetest.Call(t, "POST", srv.URL+"/v1/sessions/"+session+"/turns", keys[who], fmt.Sprintf(`{"text":%q}`, text))
		a := answer{raw: string(raw)}
		if st != 200 || json.Unmarshal(raw, &a) != nil {
			t.Fatalf("%s: %q: %d %s", who, text, st, raw)
		}
		return a
	}

	// dana, a desk agent: her tickets and the unassigned ones
	dana := session("dana")
	if a := turn("dana", dana, "open the printer on fire ticket"); a.Result == nil || a.Result.Status != "success" || a.Decision.ResolvedID != "T-1042" {
		t.Fatalf("dana opens T-1042: %+v", a)
	}
	if a := turn("dana", dana, "open the invoice shows wrong vat ticket"); strings.Contains(a.raw, "T-1044") || a.Result != nil {
		t.Fatalf("dana was offered fox's ticket: %s", a.raw)
	}
	st, raw := servetest.Call(t, "GET", srv.URL+"/v1/sessions/"+dana+"/catalogs/tickets/items", keys["dana"], "")
	if st != 200 || strings.Contains(string(raw), "T-1044") || !strings.Contains(string(raw), "T-1042") {
		t.Fatalf("dana's picker lists: %d %s", st, raw)
	}
	asked := turn("dana", dana, "assign it to fox")
	if asked.Decision.Action != "ask_clarifying_question" || len(asked.ConfirmIntent) == 0 {
		t.Fatalf("assign asks first: %+v", asked)
	}
	// eight clicks of Confirm at once: one assignment
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			<-start
			if st, raw := servetest.Call(t, "POST", srv.URL+"/v1/sessions/"+dana+"/intents", keys["dana"], string(asked.ConfirmIntent),
				"Idempotency-Key", fmt.Sprintf("click-%d", i)); st >= 500 {
				t.Errorf("click %d: %d %s", i, st, raw)
			}
		})
	}
	close(start)
	wg.Wait()
	log := desk.log(t)
	if len(log) != 1 {
		t.Fatalf("8 confirmations of one assignment: the service did %d things: %v", len(log), log)
	}
	if e := log[0]; e["what"] != "assigned" || e["ticket"] != "T-1042" || e["by"] != "dana" || e["assignee"] != "fox" ||
		e["authorization"] != "human_confirmation" || e["session"] != dana || e["idempotency_key"] == nil {
		t.Fatalf("the assignment as the service saw it: %v", e)
	}
	// the service's own role check: an agent may not close
	turn("dana", dana, "close the password reset loop ticket")
	if a := turn("dana", dana, "yes"); a.Result == nil || a.Result.Status != "failed" || !strings.Contains(a.Result.Message, "only a lead may close tickets") {
		t.Fatalf("dana closes: %+v", a.Result)
	}

	// walter, the lead: every open ticket, and he may close
	walter := session("walter")
	if a := turn("walter", walter, "open the invoice shows wrong vat ticket"); a.Result == nil || a.Result.Status != "success" {
		t.Fatalf("walter opens T-1044: %+v", a)
	}
	turn("walter", walter, "close the invoice shows wrong vat ticket")
	if a := turn("walter", walter, "yes"); a.Result == nil || a.Result.Status != "success" {
		t.Fatalf("walter closes: %+v", a.Result)
	}
	log = desk.log(t)
	if len(log) != 2 || log[1]["what"] != "closed" || log[1]["ticket"] != "T-1044" || log[1]["by"] != "walter" {
		t.Fatalf("the service's log: %v", log)
	}

	// the service answers a key once: the assignment's key again changes nothing
	key, _ := log[0]["idempotency_key"].(string)
	again := `{"args":{"agent_id":"walter"},"context":{"principal":{"user_id":"dana","roles":["agent"]},` +
		`"active_work_context":{"entity_type":"ticket","entity_header":{"id":"T-1042","display_name":"Printer on fire"}}}}`
	if st, raw := servetest.Call(t, "POST", desk.url+"/tools/assign_ticket", "", again, "X-Desk-Token", desk.token, "Idempotency-Key", key); st != 200 || !strings.Contains(string(raw), `"assignee": "fox"`) {
		t.Fatalf("a repeated key: %d %s", st, raw)
	}
	if st, _ := servetest.Call(t, "POST", desk.url+"/tools/assign_ticket", "", again, "X-Desk-Token", "wrong"); st != 401 {
		t.Fatalf("a wrong key: %d", st)
	}
	if n := len(desk.log(t)); n != 2 {
		t.Fatalf("a repeated key acted: %d entries", n)
	}
	// the secret went to the service and nowhere else
	for _, s := range []string{dana, walter} {
		st, raw := servetest.Call(t, "GET", srv.URL+"/v1/sessions/"+s+"/audit", keys["walter"], "")
		if st == 200 && strings.Contains(string(raw), desk.token) {
			t.Errorf("session %s: the service's key is in the audit", s)
		}
	}
	for _, r := range auditOf(t, srv.URL, keys["dana"], dana) {
		if b, _ := json.Marshal(r); strings.Contains(string(b), desk.token) {
			t.Errorf("record %d holds the service's key", r.Seq)
		}
	}
	if strings.Contains(srv.Stderr.String(), desk.token) {
		t.Error("serve logged the service's key")
	}
}
