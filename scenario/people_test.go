package scenario_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/scenario"
)

// call is what the desk service was asked.
type call struct {
	path, key, user, session string
}

// deskService is a help desk's service: each person's tickets (a lead
// sees all), and an assign and a close tool that answer each
// Idempotency-Key once, as the help desk example's does.
type deskService struct {
	URL   string
	mu    sync.Mutex
	calls []call
}

func newDesk(t *testing.T) *deskService {
	d := &deskService{}
	answered := map[string][]byte{}
	tickets := map[string][]string{"dana": {"T-1", "Printer on fire"}, "fox": {"T-2", "VPN drops hourly"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			var ctx struct {
				Principal struct {
					UserID string   `json:"user_id"`
					Roles  []string `json:"roles"`
				} `json:"principal"`
			}
			json.Unmarshal([]byte(r.Header.Get(resolve.ContextHeader)), &ctx)
			items := []map[string]string{}
			for user, tk := range tickets {
				if user == ctx.Principal.UserID || slices.Contains(ctx.Principal.Roles, "lead") {
					items = append(items, map[string]string{"id": tk[0], "display_name": tk[1]})
				}
			}
			json.NewEncoder(w).Encode(items)
			return
		}
		var body struct {
			Args    map[string]string `json:"args"`
			Context struct {
				Principal struct {
					UserID string `json:"user_id"`
				} `json:"principal"`
				SessionID string `json:"session_id"`
			} `json:"context"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls = append(d.calls, call{r.URL.Path, key, body.Context.Principal.UserID, body.Context.SessionID})
		if b, ok := answered[key]; ok {
			w.Write(b) // the first answer again: nothing is done twice
			return
		}
		b, _ := json.Marshal(map[string]string{"done": r.URL.Path, "by": body.Context.Principal.UserID})
		answered[key] = b
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

func (d *deskService) seen() []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// deskCore is a help desk configuration whose tickets and tools are at
// url.
func deskCore(t *testing.T, url string) *core.Core {
	c, err := core.New(context.Background(), core.Source{Name: "desk.yaml", YAML: []byte(`version: 1
modes:
  - {key: desk, default: true, toolboxes: [tickets, leads]}
toolboxes:
  - {id: tickets, catalogs: [tickets, agents], commands: [open_ticket, assign_ticket_to], tools: [assign_ticket]}
  - {id: leads, catalogs: [tickets], commands: [close_ticket], tools: [close_ticket], required_roles: [lead]}
catalogs:
  - {id: tickets, display_name: My tickets, entity_type: ticket, provider: {http: {url: "` + url + `/tickets"}}}
  - {id: agents, display_name: Agents, entity_type: agent, items: [{id: fox, display_name: Fox Mulder}]}
commands:
  - {id: open_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets},
     sets_active_context: true, active_entity_type: ticket, triggers: ["open {item}"]}
  - {id: assign_ticket_to, tool: assign_ticket, parameter: agent_id, resolver: {catalog: agents},
     preconditions: {requires_active: [ticket]}, triggers: ["assign it to {item}"]}
  - {id: close_ticket, tool: close_ticket, parameter: ticket_id, resolver: {catalog: tickets}, triggers: ["close {item}"]}
tools:
  - name: assign_ticket
    description: Assigns the open ticket to an agent.
    impact: external
    input_schema: {type: object, properties: {agent_id: {type: string}}, required: [agent_id], additionalProperties: false}
    http: {url: "` + url + `/tools/assign"}
  - name: close_ticket
    description: Closes a ticket.
    impact: external
    input_schema: {type: object, properties: {ticket_id: {type: string}}, required: [ticket_id], additionalProperties: false}
    http: {url: "` + url + `/tools/close"}
`)}, &core.Options{SkipMCP: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRun(t *testing.T, c *core.Core, path string, opts *scenario.Options) scenario.Result {
	t.Helper()
	res, err := scenario.Run(context.Background(), c, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures {
		t.Error(f)
	}
	return res
}

// TestPrincipalAndRoles: a file says who speaks and with which roles (a
// turn may change the roles); the provider answers that person, the tools
// are told who it is; a file that says nothing takes the run's.
func TestPrincipalAndRoles(t *testing.T) {
	t.Parallel()
	d := newDesk(t)
	c := deskCore(t, d.URL)
	res := mustRun(t, c, writeFile(t, "dana.yaml", `name: dana works her ticket
principal: dana
roles: [agent]
turns:
  - user: open printer on fire
    expect: {decision: invoke_command, resolved_id: T-1, status: success}
  - user: assign it to fox
    expect: {decision: invoke_command, command: assign_ticket_to, status: success}
  - user: close printer on fire
    expect: {decision: continue_with_llm}
  - user: close printer on fire
    roles: [agent, lead]
    expect: {decision: invoke_command, command: close_ticket, resolved_id: T-1, status: success}
`), nil)
	if res.Principal != "dana" || !slices.Equal(res.Decided, []string{"assign_ticket_to", "close_ticket", "open_ticket"}) ||
		res.Calls["assign_ticket"] != 1 || res.Calls["close_ticket"] != 1 {
		t.Errorf("result %+v", res)
	}
	for _, cl := range d.seen() {
		if cl.user != "dana" {
			t.Errorf("the service was called as %q: %+v", cl.user, cl)
		}
	}
	// no principal in the file: the run's
	nobody := writeFile(t, "nobody.yaml", `turns:
  - user: open vpn drops hourly
    expect: {decision: invoke_command, resolved_id: T-2}
  - user: open printer on fire
    expect: {decision: continue_with_llm}
`)
	if res := mustRun(t, c, nobody, &scenario.Options{Principal: "fox"}); res.Principal != "fox" {
		t.Errorf("as %s", res.Principal)
	}
	res, err := scenario.Run(context.Background(), c, nobody, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Principal != scenario.DefaultPrincipal || len(res.Failures) == 0 || !strings.Contains(res.Failures[0].Msg, `decision is "continue_with_llm", want "invoke_command"`) {
		t.Errorf("as the default principal: %+v", res)
	}
	// the run's roles, for files that give none
	lead := writeFile(t, "lead.yaml", `principal: walter
turns:
  - user: close vpn drops hourly
    expect: {decision: invoke_command, resolved_id: T-2, status: success}
`)
	mustRun(t, c, lead, &scenario.Options{Roles: []string{"lead"}})
	if res, _ := scenario.Run(context.Background(), c, lead, nil); len(res.Failures) == 0 {
		t.Error("walter closed a ticket without the lead role")
	}
}

// TestIDsArePerRun: the same file run twice calls the service with other
// sessions and other idempotency keys, so a service that answers a key
// once acts for each run.
func TestIDsArePerRun(t *testing.T) {
	t.Parallel()
	d := newDesk(t)
	c := deskCore(t, d.URL)
	file := writeFile(t, "twice.yaml", `principal: dana
turns:
  - user: open printer on fire
    expect: {status: success}
  - user: assign it to fox
    expect: {status: success}
`)
	mustRun(t, c, file, nil)
	mustRun(t, c, file, nil)
	calls := d.seen()
	if len(calls) != 2 {
		t.Fatalf("%d calls: %+v", len(calls), calls)
	}
	if calls[0].key == "" || calls[0].key == calls[1].key || calls[0].session == calls[1].session {
		t.Fatalf("two runs called with key %q and %q, sessions %q and %q", calls[0].key, calls[1].key, calls[0].session, calls[1].session)
	}
	// a run's ids may be named, for a run that must be exact
	mustRun(t, c, file, &scenario.Options{RunID: "run-7"})
	if cl := d.seen()[2]; !strings.HasPrefix(cl.session, "run-7-") || cl.key == calls[0].key || cl.key == calls[1].key {
		t.Fatalf("with RunID run-7: %+v", cl)
	}
	// the same run id again makes the same ids, and the service, which
	// answers a key once, takes it for the same call
	mustRun(t, c, file, &scenario.Options{RunID: "run-7"})
	if all := d.seen(); all[3].key != all[2].key || all[3].session != all[2].session {
		t.Fatalf("the same run id twice: %+v and %+v", all[2], all[3])
	}
}

// TestStubs: with its tools and its catalog stubbed in the file, a
// conversation runs without the service (none is listening); a stub's
// error is the call's failure; without the stubs the same file fails.
func TestStubs(t *testing.T) {
	t.Parallel()
	c := deskCore(t, "http://127.0.0.1:1") // nothing listens there
	body := `principal: dana
turns:
  - user: open printer on fire
    expect: {decision: invoke_command, resolved_id: T-1, status: success}
  - user: assign it to fox
    expect: {status: success}
  - user: close printer on fire
    roles: [lead]
    expect: {command: close_ticket, status: failed}
`
	stubs := `stubs:
  - catalog: tickets
    items:
      - {id: T-1, display_name: Printer on fire}
  - tool: assign_ticket
    output: {assigned: fox}
  - tool: close_ticket
    error: only a lead may close tickets
`
	res := mustRun(t, c, writeFile(t, "stubbed.yaml", stubs+body), nil)
	if !slices.Equal(res.Stubbed, []string{"catalog tickets", "tool assign_ticket", "tool close_ticket"}) ||
		res.Calls["assign_ticket"] != 1 || res.Calls["close_ticket"] != 1 {
		t.Errorf("result %+v", res)
	}
	// the stub's answer and failure are what the gate recorded
	res, err := scenario.Run(context.Background(), c, writeFile(t, "stubbed-check.yaml", stubs+`principal: dana
turns:
  - user: open printer on fire
  - user: close printer on fire
    roles: [lead]
    expect: {error: tool_failed}
`), nil)
	if err != nil || len(res.Failures) != 0 {
		t.Errorf("the stub's error: %v %v", err, res.Failures)
	}
	res, err = scenario.Run(context.Background(), c, writeFile(t, "unstubbed.yaml", body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) == 0 || len(res.Stubbed) != 0 {
		t.Errorf("without stubs, against nothing: %+v", res)
	}
}

// TestBadStubs: a stub that is not one thing, or names what the
// configuration does not have, is refused naming the file and line.
func TestBadStubs(t *testing.T) {
	t.Parallel()
	c := deskCore(t, "http://127.0.0.1:1")
	turn := "turns:\n  - user: hi\n"
	for body, want := range map[string]string{
		"stubs:\n  - {output: 1}\n":                                      ":2: stubs[0]: give tool (with output or error) or catalog",
		"stubs:\n  - {tool: assign_ticket, catalog: tickets}\n":          "give tool or catalog, not both",
		"stubs:\n  - {tool: assign_ticket, output: 1, error: x}\n":       "give output or error, not both",
		"stubs:\n  - {tool: assign_ticket, items: []}\n":                 "a tool stub has output or error, not items",
		"stubs:\n  - {catalog: tickets, error: x}\n":                     "a catalog stub has items, not output or error",
		"stubs:\n  - {catalog: tickets, items: [{display_name: x}]}\n":   "items[0]: missing id",
		"stubs:\n  - {catalog: tickets, items: [{id: a}, {id: a}]}\n":    `items[1]: id "a" is given twice`,
		"stubs:\n  - {tool: assign_ticket}\n  - {tool: assign_ticket}\n": ":3: stubs[1]: assign_ticket is stubbed twice",
		"stubs:\n  - {tool: nope}\n":                                     `:2: stubs: unknown tool "nope"`,
		"stubs:\n  - {catalog: nope, items: []}\n":                       `:2: stubs: unknown catalog "nope" (catalogs: tickets, agents)`,
		"roles: [a, '']\n":                        "roles[1] is empty",
		"turns:\n  - user: hi\n    roles: ['']\n": ":2: turn 1: roles[0] is empty",
	} {
		if !strings.HasPrefix(body, "turns:") {
			body += turn
		}
		path := writeFile(t, "bad.yaml", body)
		_, err := scenario.Run(context.Background(), c, path, nil)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// FuzzParse: no file panics the parser, and a file it accepts has turns
// that are each one kind, and stubs that are each one thing.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: x\nprincipal: dana\nroles: [lead]\nstubs:\n  - {tool: t, output: {a: 1}}\n  - {catalog: c, items: [{id: A, display_name: a}]}\nturns:\n  - user: hi\n    roles: [agent]\n    expect: {decision: continue_with_llm}\n"))
	f.Add([]byte("turns:\n  - select: {command: c, id: i}\n  - confirm: true\n  - decline: true\n"))
	f.Add([]byte("turns:\n  - user: a\n---\nturns: []\n"))
	f.Add([]byte("stubs: [{tool: t, output: !!binary aGk=}]\nturns: [{user: x}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := scenario.Parse("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		if len(file.Turns) == 0 {
			t.Fatal("accepted a file without turns")
		}
		for _, tn := range file.Turns {
			n := 0
			for _, set := range []bool{tn.User != nil, tn.Select != nil, tn.Confirm, tn.Decline} {
				if set {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("accepted a turn of %d kinds", n)
			}
		}
		for _, s := range file.Stubs {
			if (s.Tool == "") == (s.Catalog == "") {
				t.Fatalf("accepted stub %+v", s)
			}
			if s.Tool != "" {
				if _, err := json.Marshal(s.Output); err != nil {
					t.Fatalf("accepted output that is not JSON: %v", err)
				}
			}
		}
	})
}
