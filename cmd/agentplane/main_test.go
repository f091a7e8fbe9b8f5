package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/plane"
)

func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runEnv(t, nil, stdin, args...)
}

// runEnv runs the program in-process with the environment env; its
// database is a file of the test's own unless env names AGENTPLANE_DB.
func runEnv(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	db := filepath.Join(t.TempDir(), "agentplane.db") // never the working directory's
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Now: func() time.Time { return time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) },
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "AGENTPLANE_DB" {
				return db
			}
			return ""
		}}
	code := m.Run(context.Background(), args)
	return out.String(), errOut.String(), code
}

func TestRouteContract(t *testing.T) {
	t.Parallel()
	input := strings.Join([]string{
		`{"text": "switch to ddr mode"}`,
		`{"text": "open the cfo template", "ui": true}`,
		`{"text": "send this to the Q1 pilot list", "mode": "sales", "awc": {"entity_type": "email_template", "entity_header": {"id": "TPL-123", "display_name": "Q1 CFO Outreach"}}}`,
		`{"text": "hello there"}`,
		`{"selection": {"command_id": "set_mode", "id": "sales"}}`,
		`not json`,
		`{"text": "x", "mode": "nope"}`,
		`{"txt": "typo"}`,
		`{"text": "` + strings.Repeat("a", 5000) + `"}`,
		`{"text": "a\u0007b"}`,
		`{"selection": {"command_id": "send_template_to_list", "id": "LIST-9"}}`,
		`{"text": "` + strings.Repeat("b", 70000) + `"}`,
		`{"text": "switch to sales mode", "roles": ["admin"]}`,
		`{"text": "switch to ddr mode", "text": "hello"}`,
		`{"text": "hi", "awc": {"entity_header": {"id": "T", "display_name": "t"}}}`,
	}, "\n")
	out, _, code := run(t, input, "route")
	if code != 1 {
		t.Errorf("exit %d, want 1 (some lines failed)", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 15 {
		t.Fatalf("%d output lines for 15 inputs:\n%s", len(lines), out)
	}
	want := []string{
		`"action":"invoke_command","command_id":"set_mode","resolved_id":"ddr"`,
		`"action":"open_picker","command_id":"set_active_email_template","picker_type":"list","catalog_id":"email_templates","prefilter_text":"cfo","highlight_id":"TPL-123"`,
		`"action":"ask_clarifying_question","command_id":"send_template_to_list","resolved_id":"LIST-9","question_text":"Confirm send to 'Q1 pilot list'?","options":["Yes","No"]`,
		`"action":"continue_with_llm","reason_code":"no_control_intent"`,
		`"action":"invoke_command","command_id":"set_mode","resolved_id":"sales"`,
		`"error":{"code":"invalid_input","message":"line 6: not a turn object`,
		`"error":{"code":"invalid_input","message":"line 7: unknown mode \"nope\""`,
		`"error":{"code":"invalid_input","message":"line 8: not a turn object: json: unknown field \"txt\""`,
		`"error":{"code":"input_too_long"`,
		`"error":{"code":"invalid_input","message":"line 10: text has control character U+0007`,
		`"error":{"code":"inactive_action"`,
		`"error":{"code":"input_too_long","message":"line 12: longer than 65536 bytes"`,
		`"action":"invoke_command","command_id":"set_mode","resolved_id":"sales"`,
		`"error":{"code":"invalid_input","message":"line 14: not a turn object: JSON at byte 46: duplicate member name \"text\""`,
		`"error":{"code":"invalid_input","message":"line 15: awc: active work context: entity \"T\" has no entity type"`,
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %s\nwant it to contain %s", i+1, lines[i], w)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &v); err != nil {
			t.Errorf("line %d is not JSON: %v", i+1, err)
		}
		if _, isErr := v["error"]; !isErr {
			if tr, ok := v["trace"].([]any); !ok || len(tr) == 0 {
				t.Errorf("line %d has no trace", i+1)
			}
		}
	}
}

func TestRouteAllGoodExitsZero(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "{\"text\":\"hi\"}\n{\"text\":\"switch to ddr mode\"}", "route")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("exit %d, out %q", code, out)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "", "validate")
	if code != 0 || !strings.Contains(out, "valid (3 modes") ||
		!strings.Contains(out, "  mode general: off — only 4 active commands with examples or triggers (20+ needed)") {
		t.Fatalf("demo: exit %d, %s", code, out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nmodes: [{key: a, default: true, toolboxes: [t]}]\ntoolboxes: [{id: t, commands: [c]}]\ncommands:\n  - {id: c, tool: agent_set_mode, parameter: p, resolver: {catalog: emial_templates}}\n  - {id: d, tool: nope, parameter: p, resolver: {catalog: modes}}\n"), 0o644)
	out, _, code = run(t, "", "validate", "--config", bad)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{
		bad + `:5: commands[0].resolver.catalog: unknown catalog "emial_templates"`,
		bad + `:6: commands[1].tool: unknown tool "nope"`,
		"2 problem(s)",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	_, errOut, code := run(t, "", "validate", "--config", filepath.Join(dir, "missing.yaml"))
	if code != 1 {
		t.Fatalf("missing file: exit %d %s", code, errOut)
	}
	if _, _, code := run(t, "", "frobnicate"); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
	if _, _, code := run(t, "", "route", "--bogus"); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
}

func TestChatTranscript(t *testing.T) {
	t.Parallel()
	script := strings.Join([]string{
		"switch to sales mode",
		"I want to work on email templates",
		"1",
		"send this to the q1 pilot list",
		"yes",
		"open the outreach template",
		"9",
		"2",
		"rewrite this for the CFO persona",
		"\x01bad",
		":quit",
	}, "\n")
	out, _, code := run(t, script, "chat")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, w := range []string{
		"✓ Mode: Sales.",
		"Pick from Email templates:\n  1. Q1 CFO Outreach (TPL-123)",
		"✓ Now working on email template Q1 CFO Outreach (TPL-123).",
		"[mode: sales | active email_template: Q1 CFO Outreach (TPL-123) | audience persona: CFO - MidMarket (PERS-22)]",
		"? Confirm send to 'Q1 pilot list'?\n  (yes / no)",
		"✓ Send the template to a mailer list: Q1 pilot list — done.",
		"Pick from Email templates matching \"outreach\":\n  1. Q1 CFO Outreach (TPL-123)\n  2. Q1 CTO Outreach (TPL-124)",
		"Pick a number from 1 to 2.",
		"✓ Now working on email template Q1 CTO Outreach (TPL-124).",
		"No LLM is configured yet",
		"! text has control character U+0001 at byte 0 (invalid_input)",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("transcript lacks %q", w)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// FuzzRouteLine checks that no input line makes `agentplane route` panic,
// and that every line yields a decision or a coded error.
func FuzzRouteLine(f *testing.F) {
	m := &Main{Stderr: io.Discard, Now: time.Now, Getenv: func(string) string { return "" }}
	rt, err := m.open(context.Background(), &common{}, plane.Options{Core: m.routing()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rt.Close(0) })
	c := rt.Core
	for _, s := range []string{`{"text":"switch to ddr mode"}`, `{"selection":{"command_id":"set_mode","id":"x"}}`, `{"text":1}`, `[]`, `{"text":"a","roles":[null]}`, `{"text":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d, err := routeLine(context.Background(), c, line)
		if err == nil && d.Action == "" {
			t.Fatalf("no action and no error for %q", line)
		}
	})
}

func TestChatAuditFileAndVerify(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	_, _, code := run(t, "switch to sales mode\nopen the q1 cfo outreach template\nsend it to the q1 pilot list\nyes\nhello\n", "chat", "--audit-file", path)
	if code != 0 {
		t.Fatalf("chat exit %d", code)
	}
	_, _, code = run(t, "switch to ddr mode\n", "chat", "--audit-file", path) // a second session, appended
	if code != 0 {
		t.Fatalf("chat exit %d", code)
	}
	out, _, code := run(t, "", "audit", "verify", path)
	if code != 0 || !strings.Contains(out, "intact: 8 records in 2 sessions") {
		t.Fatalf("verify: exit %d, %s", code, out)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"question_text":"Confirm send to 'Q1 pilot list'?"`) || !regexp.MustCompile(`"output":\{"list_id":"LIST-9","request_id":"[0-9a-f]+","send_id":1,"template_id":"TPL-123"`).Match(data) {
		t.Fatalf("the log lacks the decision or the result:\n%s", data)
	}
	tampered := strings.Replace(string(data), `"resolved_id":"LIST-9"`, `"resolved_id":"LIST-10"`, 1)
	os.WriteFile(path, []byte(tampered), 0o644)
	out, _, code = run(t, "", "audit", "verify", path)
	if code != 1 || !strings.Contains(out, "line 4: session") || !strings.Contains(out, "hash mismatch") {
		t.Fatalf("tampered: exit %d, %s", code, out)
	}
	if _, _, code := run(t, "", "audit", "verify"); code != 2 {
		t.Fatalf("usage: exit %d", code)
	}
}

// TestAuditFileIsComplete: the --audit-file export catches up from the
// store — a session resumed with a new file, a file that lost its tail
// (a kill between the store's commit and the file's write) — and a file
// that cannot be kept complete fails the chat loudly.
func TestAuditFileIsComplete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	first := filepath.Join(dir, "first.jsonl")
	out, _, code := run(t, "switch to sales mode\nopen the q1 cfo outreach template\n", "chat", "--db", db, "--audit-file", first)
	id := regexp.MustCompile(`session ([0-9a-f]+),`).FindStringSubmatch(out)
	if code != 0 || id == nil {
		t.Fatalf("exit %d\n%s", code, out)
	}
	verify := func(path string, records int) {
		t.Helper()
		out, _, code := run(t, "", "audit", "verify", path)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("intact: %d records in 1 sessions", records)) {
			t.Fatalf("%s: exit %d, %s", path, code, out)
		}
	}
	verify(first, 3)
	// resumed with a new file: the whole chain so far is exported, then the new turn
	second := filepath.Join(dir, "second.jsonl")
	if _, errOut, code := run(t, "hello\n", "chat", "--db", db, "--session", id[1], "--audit-file", second); code != 0 {
		t.Fatalf("resume: exit %d %s", code, errOut)
	}
	verify(second, 4)
	// the first file lost its last line (killed before writing it): it catches up
	data, _ := os.ReadFile(first)
	lines := strings.SplitAfter(strings.TrimSpace(string(data)), "\n")
	os.WriteFile(first, []byte(strings.Join(lines[:2], "")), 0o600)
	if _, errOut, code := run(t, "switch to ddr mode\n", "chat", "--db", db, "--session", id[1], "--audit-file", first); code != 0 {
		t.Fatalf("catch up: exit %d %s", code, errOut)
	}
	verify(first, 5)
	// a file holding another chain for the session cannot be continued: the chat refuses
	other := filepath.Join(dir, "other.db")
	if _, errOut, code := run(t, "hello\n", "chat", "--db", other, "--session", id[1], "--audit-file", first); code != 1 || !strings.Contains(errOut, "no session") {
		t.Fatalf("unknown session in another db: exit %d %s", code, errOut)
	}
	forged := strings.Replace(string(data), id[1], "0000", -1)
	os.WriteFile(first, []byte(forged), 0o600)
	if _, errOut, code := run(t, "hello\n", "chat", "--db", db, "--session", id[1], "--audit-file", first); code != 1 || !strings.Contains(errOut, first) {
		t.Fatalf("a broken file: exit %d %s", code, errOut)
	}
}

func TestTestCommand(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../examples/*.yaml")
	out, _, code := run(t, "", append([]string{"test"}, files...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d passed, 0 failed", len(files))) {
		t.Fatalf("examples: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("turns:\n  - user: switch to ddr mode\n    expect: {mode: sales}\n"), 0o644)
	out, _, code = run(t, "", "test", bad, files[0])
	if code != 1 || !strings.Contains(out, "FAIL "+bad+`:2: turn 1: mode is "ddr", want "sales"`) || !strings.Contains(out, "1 passed, 1 failed") {
		t.Fatalf("failing file: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "not covered: no turn decided open_email_templates, set_active_email_template, close_email_template, send_template_to_list, open_ddrs, set_active_ddr") {
		t.Errorf("what was not covered:\n%s", out)
	}
}

// TestTestCommandPeopleAndStubs: --principal and --roles for files that
// name nobody; a file's stubs stand in for a service nobody runs, and the
// output says what was stubbed and what ran against a real service.
func TestTestCommandPeopleAndStubs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var calls sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Store(r.URL.Path, true)
		w.Write([]byte(`{"ok": true}`))
	}))
	defer srv.Close()
	cfg := filepath.Join(dir, "desk.yaml")
	os.WriteFile(cfg, []byte(`version: 1
modes: [{key: desk, default: true, toolboxes: [t, leads]}]
toolboxes:
  - {id: t, catalogs: [tickets], commands: [open_ticket], tools: [archive]}
  - {id: leads, catalogs: [tickets], commands: [close_ticket], tools: [close], required_roles: [lead]}
catalogs: [{id: tickets, entity_type: ticket, provider: {http: {url: "http://127.0.0.1:1/tickets"}}}]
commands:
  - {id: open_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets},
     sets_active_context: true, active_entity_type: ticket, triggers: ["open {item}"]}
  - {id: close_ticket, tool: close, parameter: ticket_id, resolver: {catalog: tickets}, triggers: ["close {item}"]}
tools:
  - {name: close, description: Closes a ticket., impact: external, http: {url: "`+srv.URL+`/close"},
     input_schema: {type: object, properties: {ticket_id: {type: string}}, required: [ticket_id]}}
  - {name: archive, description: Archives a ticket., impact: external, http: {url: "`+srv.URL+`/archive"},
     input_schema: {type: object, properties: {ticket_id: {type: string}}, required: [ticket_id]}}
`), 0o644)
	file := filepath.Join(dir, "close.yaml")
	os.WriteFile(file, []byte(`stubs:
  - catalog: tickets
    items: [{id: T-1, display_name: Printer on fire}]
  - tool: archive
    output: {archived: true}
turns:
  - user: close printer on fire
    expect: {decision: invoke_command, command: close_ticket, resolved_id: T-1, status: success}
`), 0o644)
	out, _, code := run(t, "", "test", "--config", cfg, "--principal", "walter", "--roles", "lead", file)
	if code != 0 || !strings.Contains(out, "ok   "+file+" (as walter)") || !strings.Contains(out, "not covered: no turn decided open_ticket") ||
		!strings.Contains(out, "stubbed: catalog tickets ("+file+")") || !strings.Contains(out, "stubbed: tool archive ("+file+")") ||
		!strings.Contains(out, "ran against the real service: close (1 calls)") {
		t.Fatalf("as walter, lead: exit %d\n%s", code, out)
	}
	if _, ok := calls.Load("/close"); !ok {
		t.Error("the real close tool was not called")
	}
	if out, _, code := run(t, "", "test", "--config", cfg, file); code != 1 || !strings.Contains(out, `decision is "continue_with_llm", want "invoke_command"`) {
		t.Errorf("without the lead role: exit %d\n%s", code, out)
	}
}

func TestToolsCommand(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "", "tools", "list", "--mode", "sales")
	if code != 0 || !regexp.MustCompile(`send_template\s+external\s+medium\s+unless the human asks`).MatchString(out) || !regexp.MustCompile(`agent_set_mode\s+internal\s+low\s+no`).MatchString(out) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if out, _, _ := run(t, "", "tools", "list", "--mode", "ddr"); strings.Contains(out, "send_template") {
		t.Fatalf("an inactive tool was listed:\n%s", out)
	}
	out, _, code = run(t, "", "tools", "call", "--mode", "ddr", "catalog_search", `{"catalog_id":"ddrs","query":"control plane"}`)
	if code != 0 || !strings.Contains(out, `"id": "AGN-000037"`) || !strings.Contains(out, `"status": "success"`) {
		t.Fatalf("call: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "", "tools", "call", "--mode", "sales", "--origin", "llm", "send_template", `{"list_id":"LIST-9"}`)
	if code != 1 || !strings.Contains(out, `"status": "confirmation_required"`) || strings.Contains(out, "confirmation_token") {
		t.Fatalf("LLM send: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "", "tools", "call", "catalog_search", `{"query":"x"}`)
	if code != 1 || !strings.Contains(out, `"code": "invalid_args"`) {
		t.Fatalf("bad args: exit %d\n%s", code, out)
	}
	if _, _, code := run(t, "", "tools"); code != 2 {
		t.Fatalf("usage: exit %d", code)
	}
	if _, errOut, code := run(t, "", "tools", "call", "--origin", "root", "catalog_search", `{}`); code != 2 || !strings.Contains(errOut, `--origin "root"`) {
		t.Fatalf("an unknown origin: exit %d %s", code, errOut)
	}
}

func TestMCPMountedTools(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	type echoOut struct {
		Said string `json:"said"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, i echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Said: i.Text}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	cfg := filepath.Join(t.TempDir(), "mcp.yaml")
	os.WriteFile(cfg, []byte(`version: 1
modes: [{key: general, default: true, toolboxes: [files]}]
toolboxes: [{id: files, mcp_servers: [files, gone]}]
mcp_servers:
  - {name: files, url: "`+hs.URL+`"}
  - {name: gone, url: "http://127.0.0.1:1/mcp", connect_timeout_ms: 300}
`), 0o644)
	out, _, code := run(t, "", "tools", "list", "--config", cfg)
	if code != 0 || !regexp.MustCompile(`files_echo\s+read\s+low\s+no`).MatchString(out) ||
		!strings.Contains(out, "MCP server files: up, 1 tools") || !strings.Contains(out, "MCP server gone: down (connect:") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "", "tools", "call", "--config", cfg, "--origin", "llm", "files_echo", `{"text":"hi"}`)
	if code != 0 || !strings.Contains(out, `"said": "hi"`) {
		t.Fatalf("call: exit %d\n%s", code, out)
	}
}

func TestChatResumesAStoredSession(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "state.db")
	out, _, code := run(t, "switch to sales mode\nopen the q1 cfo outreach template\nsend it to the q1 pilot list\n", "chat", "--db", db)
	m := regexp.MustCompile(`session ([0-9a-f]+),`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	id := m[1]
	// a new process: the mode, the active template and the pending confirmation survived
	out, _, code = run(t, "yes\n", "chat", "--db", db, "--session", id)
	if code != 0 || !strings.Contains(out, "mode Sales") || !strings.Contains(out, "✓ Send the template to a mailer list: Q1 pilot list — done.") {
		t.Fatalf("resumed run: exit %d\n%s", code, out)
	}
	exported, _, code := run(t, "", "audit", "export", "--db", db, "--session", id)
	if code != 0 || strings.Count(exported, "\n") != 5 {
		t.Fatalf("export: exit %d\n%s", code, exported)
	}
	file := filepath.Join(t.TempDir(), "export.jsonl")
	os.WriteFile(file, []byte(exported), 0o644)
	if out, _, code := run(t, "", "audit", "verify", file); code != 0 || !strings.Contains(out, "intact: 5 records in 1 sessions") {
		t.Fatalf("verify export: exit %d %s", code, out)
	}
	if _, errOut, code := run(t, "", "chat", "--db", db, "--session", "nope"); code != 1 || !strings.Contains(errOut, `no session "nope"`) {
		t.Fatalf("unknown session: exit %d %s", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.db")
	os.WriteFile(bad, []byte(strings.Repeat("garbage ", 200)), 0o644)
	if _, errOut, code := run(t, "", "chat", "--db", bad); code != 1 || !strings.Contains(errOut, bad) {
		t.Fatalf("corrupt db: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, "", "chat", "--db", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"); code != 1 || !strings.Contains(errOut, "cannot reach postgres://nobody@127.0.0.1:1/x") {
		t.Fatalf("unreachable postgres: exit %d %s", code, errOut)
	}
}

// TestResumeAfterTheConfigurationChanged: a stored session whose mode the
// configuration no longer has is resumed in the default mode, saying so,
// and recorded (it once panicked).
func TestResumeAfterTheConfigurationChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	out, _, code := run(t, "switch to ddr mode\n", "chat", "--db", db)
	id := regexp.MustCompile(`session ([0-9a-f]+),`).FindStringSubmatch(out)
	if code != 0 || id == nil {
		t.Fatalf("exit %d\n%s", code, out)
	}
	cfg := filepath.Join(dir, "small.yaml")
	os.WriteFile(cfg, []byte(`version: 1
modes:
  - {key: general, display_name: General, default: true, toolboxes: [core]}
toolboxes: [{id: core, catalogs: [modes], commands: [set_mode]}]
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true, triggers: ["switch to {item} mode"]}
`), 0o600)
	out, errOut, code := run(t, "hello\n", "chat", "--db", db, "--config", cfg, "--session", id[1])
	if code != 0 || !strings.Contains(errOut, `mode "ddr" is no longer configured; the session continues in the default mode "general"`) ||
		!strings.Contains(out, "mode General") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	exported, _, _ := run(t, "", "audit", "export", "--db", db, "--session", id[1])
	if !strings.Contains(exported, `"kind":"resume"`) || !strings.Contains(exported, `"notes":["mode \"ddr\" is no longer configured`) {
		t.Fatalf("the resume is not recorded:\n%s", exported)
	}
}

// TestChatEndsOnInterrupt: Ctrl-C ends the chat at once, even while it
// waits for a line (it used to wait for Enter).
func TestChatEndsOnInterrupt(t *testing.T) {
	t.Parallel()
	stdin, w := io.Pipe() // a terminal nobody types into
	defer w.Close()
	var out, errOut servetest.SyncBuffer
	db := filepath.Join(t.TempDir(), "a.db")
	m := &Main{Stdin: stdin, Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return map[string]string{"AGENTPLANE_DB": db}[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"chat"}) }()
	for !strings.Contains(out.String(), "> ") { // wait until it waits for a line
		select {
		case code := <-done:
			t.Fatalf("the chat ended before it asked for a line: exit %d, %s", code, errOut.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != 130 || !strings.Contains(errOut.String(), "interrupted") {
		t.Fatalf("exit %d, %s", code, errOut.String())
	}
}

// TestKeygen: a new key each time, long enough for auth.keys, and the
// digest that configures it.
func TestKeygen(t *testing.T) {
	t.Parallel()
	parse := func() (key, digest string) {
		out, _, code := run(t, "", "keygen")
		m := regexp.MustCompile(`^key:\s+([A-Za-z0-9_-]{43})\nkey_sha256: ([0-9a-f]{64})\n$`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("keygen: exit %d, %q", code, out)
		}
		return m[1], m[2]
	}
	k1, d1 := parse()
	k2, _ := parse()
	if k1 == k2 {
		t.Fatal("the same key twice")
	}
	if sum := sha256.Sum256([]byte(k1)); hex.EncodeToString(sum[:]) != d1 {
		t.Fatalf("the digest is not the key's: %s", d1)
	}
	if _, _, code := run(t, "", "keygen", "extra"); code != 2 {
		t.Fatalf("keygen with an argument: exit %d", code)
	}
}

// TestEvalCommand: the demo's labelled file passes; a file with a wrong
// label reports it and exits 1 under --min-accuracy.
func TestEvalCommand(t *testing.T) {
	out, _, code := run(t, "", "eval", "--min-accuracy", "1", "../../examples/routing.jsonl")
	if code != 0 || !strings.Contains(out, "decided as expected (100.00 %)") || !strings.Contains(out, "0 kept from the LLM") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"text": "switch to ddr mode", "expect": {"action": "continue_with_llm"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, "", "eval", "--min-accuracy", "0.9", "--trace", bad)
	if code != 1 || !strings.Contains(out, `line 1 "switch to ddr mode"`) || !strings.Contains(out, "1 kept from the LLM") ||
		!strings.Contains(out, "decision: invoke_command set_mode(ddr)") || !strings.Contains(stderr, "under --min-accuracy") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, stderr)
	}
	if _, stderr, code := run(t, "", "eval", "--min-accuracy", "2", bad); code == 0 || !strings.Contains(stderr, "between 0 and 1") {
		t.Errorf("--min-accuracy 2: exit %d %s", code, stderr)
	}
	if !strings.Contains(out, "not covered: no line expects set_mode, open_email_templates") || !strings.Contains(out, "not covered: no line is in mode ddr, sales") ||
		!strings.Contains(out, "0.2 serves this file best") {
		t.Errorf("what is not covered, and the advice:\n%s", out)
	}
	// the run's roles and principal, for lines that give none
	roles := filepath.Join(t.TempDir(), "roles.yaml")
	os.WriteFile(roles, []byte(`version: 1
modes: [{key: home, default: true, toolboxes: [music, admin]}]
toolboxes:
  - {id: music, catalogs: [albums], commands: [play_album]}
  - {id: admin, catalogs: [albums], commands: [delete_album], required_roles: [curator]}
catalogs:
  - {id: albums, entity_type: album, items: [{id: AL-1, display_name: Abbey Road}]}
commands:
  - {id: play_album, tool: agent_set_active_entity, parameter: album, resolver: {catalog: albums},
     sets_active_context: true, active_entity_type: album, triggers: ["play {item}"]}
  - {id: delete_album, tool: agent_clear_active_entity, parameter: album, resolver: {catalog: albums},
     clears_active_context: true, triggers: ["delete {item}"]}
`), 0o644)
	lines := filepath.Join(t.TempDir(), "roles.jsonl")
	os.WriteFile(lines, []byte(`{"text": "delete abbey road", "expect": {"action": "invoke_command", "command_id": "delete_album", "resolved_id": "AL-1"}}
{"text": "delete abbey road", "roles": [], "principal": "kim", "expect": {"action": "continue_with_llm"}}
`), 0o644)
	if out, _, code := run(t, "", "eval", "--config", roles, "--roles", "curator", "--min-accuracy", "1", lines); code != 0 {
		t.Errorf("--roles curator: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "", "eval", "--config", roles, "--min-accuracy", "1", lines)
	if code != 1 || !strings.Contains(out, `line 1 "delete abbey road" (mode "", ui false): want invoke_command delete_album(AL-1), got continue_with_llm`) ||
		!strings.Contains(out, "not covered: no line expects play_album") {
		t.Errorf("no roles: exit %d\n%s", code, out)
	}
}

// TestProbeCommand: the frames kept clean pass on the demo; a careless
// trigger fails the probe, naming the frame and the act, unless --max
// allows it; a bad frame is a usage error; a catalog the probe could not
// fill is named.
func TestProbeCommand(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "", "probe", "--summary", "--frames", "negation,question,report,plan,colleague,hesitation,reminder,mention")
	if code != 0 || !strings.Contains(out, "as local (roles [])") || !regexp.MustCompile(`(?m)^  negation +\d+ +\d+ +0 +0 +0 +0$`).MatchString(out) ||
		strings.Contains(out, "laughter") {
		t.Fatalf("demo: exit %d\n%s", code, out)
	}
	careless := filepath.Join(t.TempDir(), "careless.yaml")
	os.WriteFile(careless, []byte(`version: 1
modes: [{key: home, default: true, toolboxes: [music]}]
toolboxes: [{id: music, catalogs: [albums], commands: [play_album]}]
catalogs:
  - {id: albums, entity_type: album, items: [{id: AL-1, display_name: Abbey Road}]}
commands:
  - {id: play_album, tool: agent_set_active_entity, parameter: album, resolver: {catalog: albums},
     sets_active_context: true, active_entity_type: album, triggers: ["play {item}", "remind me to play {item} tomorrow"]}
`), 0o644)
	out, _, code = run(t, "", "probe", "--config", careless, "--frames", "reminder")
	if code != 1 || !strings.Contains(out, `HIJACK reminder "remind me to play Abbey Road tomorrow" in mode home (ui false): invokes play_album(AL-1)`) {
		t.Fatalf("careless: exit %d\n%s", code, out)
	}
	n := regexp.MustCompile(`(\d+) not handed to the LLM`).FindStringSubmatch(out)
	if n == nil {
		t.Fatalf("no count:\n%s", out)
	}
	if _, _, code := run(t, "", "probe", "--config", careless, "--frames", "reminder", "--max", n[1]); code != 0 {
		t.Errorf("--max %s: exit %d", n[1], code)
	}
	if _, stderr, code := run(t, "", "probe", "--frames", "jokes"); code != 2 || !strings.Contains(stderr, `unknown frame "jokes"`) {
		t.Errorf("--frames jokes: exit %d %s", code, stderr)
	}
	desk := filepath.Join(t.TempDir(), "desk.yaml")
	os.WriteFile(desk, []byte(`version: 1
modes: [{key: desk, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [tickets], commands: [open_ticket]}]
catalogs: [{id: tickets, entity_type: ticket, provider: {http: {url: "http://127.0.0.1:1/tickets"}}}]
commands:
  - {id: open_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets},
     sets_active_context: true, active_entity_type: ticket, triggers: ["open {item}"]}
`), 0o644)
	out, _, code = run(t, "", "probe", "--config", desk, "--principal", "dana", "--roles", "agent,oncall", "--summary")
	if code != 0 || !strings.Contains(out, "as dana (roles [agent, oncall])") ||
		!strings.Contains(out, "not covered: catalog:tickets: no items for dana (roles [agent, oncall])") {
		t.Fatalf("desk: exit %d\n%s", code, out)
	}
}
