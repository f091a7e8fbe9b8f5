package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
)

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data, "bad.yaml", nil)
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("err = %v, want Problems", err)
	}
	got := err.Error()
	want := []string{
		`bad.yaml:5: modes[0].toolboxes[1]: unknown toolbox "nope"`,
		`bad.yaml:6: modes[1].key: "Sales Mode": use lowercase letters`,
		`bad.yaml:7: modes[1].id: "not-a-guid" is not a GUID without hyphens`,
		`bad.yaml:8: modes[1].default: a second default mode`,
		`bad.yaml:13: toolboxes[0].commands[3]: unknown command "ghost"`,
		`bad.yaml:14: toolboxes[0].tools[0]: unknown tool "unknown_tool"`,
		`bad.yaml:18: catalogs[0].items[0].related[0].role: missing`,
		`bad.yaml:19: catalogs[0].items[1].id: duplicate item id "TPL-1"`,
		`bad.yaml:19: catalogs[0].items[1].display_name: missing`,
		`bad.yaml:21: catalogs[1].provider.http.url: "ftp://x" is not an http:// or https:// URL`,
		`bad.yaml:22: catalogs[1].ttl_seconds: must not be negative`,
		`bad.yaml:29: commands[0].triggers[1]: trigger "switch to (a|b mode", column 11: unclosed '('`,
		`bad.yaml:30: commands[0].colour: unknown field "colour"`,
		`bad.yaml:34: commands[1].on_select: "set_mode" does not resolve against catalog "email_templates"`,
		`bad.yaml:35: commands[1].triggers[0]: a launcher's trigger has no {slot}`,
		`bad.yaml:37: commands[2].tool: unknown tool "send_email"`,
		`bad.yaml:39: commands[2].resolver.catalog: unknown catalog "emial_templates"`,
		`bad.yaml:40: commands[2].requires_confirmation: expected true or false, found "yes please"`,
		`bad.yaml:41: commands[2].triggers[0]: no {item} slot`,
		`bad.yaml:43: tools[0].name: "bad name!": must match`,
		`tools[0].description: missing`,
		`bad.yaml:44: tools[0].impact: "sometimes": must be read, internal or external`,
		`bad.yaml:47: router.max_options: must be between 1 and 20`,
		`bad.yaml:48: router.example_threshold: must be greater than 0 and at most 1`,
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing problem %q", w)
		}
	}
	if t.Failed() {
		t.Logf("got:\n%s", got)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"NotYAML", "version: [1", "invalid YAML"},
		{"Empty", "", "the file is empty"},
		{"NoVersion", "modes: [{key: a, default: true}]", "version: missing"},
		{"FutureVersion", "version: 2\nmodes: [{key: a, default: true}]", "unsupported version 2"},
		{"NoModes", "version: 1", "no modes"},
		{"NoDefault", "version: 1\nmodes: [{key: a}]", "no default mode"},
		{"ModesIsMap", "version: 1\nmodes: {key: a}", "modes: expected a list"},
		{"DuplicateKey", "version: 1\nversion: 1\nmodes: [{key: a, default: true}]", `duplicate key "version"`},
		{"Suggestion", "version: 1\nmodes: [{key: a, defualt: true}]", `did you mean "default"`},
		{"ReservedCatalog", "version: 1\nmodes: [{key: a, default: true}]\ncatalogs: [{id: modes, items: []}]", "built-in catalog of modes"},
		{"AliasClash", "version: 1\nmodes: [{key: a, default: true, aliases: [b]}, {key: b}]", `already names mode "a"`},
		{"EntityTypeUnnamed", "version: 1\nmodes: [{key: a, default: true}]\nentity_types: {email_template: {display_name: ' '}}", "entity_types.email_template.display_name: missing"},
		{"EntityTypeKey", "version: 1\nmodes: [{key: a, default: true}]\nentity_types: {Email Template: {display_name: x}}", `entity type "Email Template": want lower-case`},
		{"InactiveCatalog", `version: 1
modes: [{key: a, default: true, toolboxes: [t]}]
toolboxes: [{id: t, commands: [c]}]
catalogs: [{id: k, items: [{id: x, display_name: X}]}]
commands: [{id: c, tool: agent_set_active_entity, parameter: p, resolver: {catalog: k}, sets_active_context: true, active_entity_type: e}]`,
			`catalog "k" is not enabled in mode "a"`},
		{"RoleGatedCatalog", `version: 1
modes: [{key: a, default: true, toolboxes: [t, admin]}]
toolboxes: [{id: t, commands: [c]}, {id: admin, catalogs: [k], required_roles: [admin]}]
catalogs: [{id: k, entity_type: e, items: [{id: x, display_name: X}]}]
commands: [{id: c, tool: agent_set_active_entity, parameter: p, resolver: {catalog: k}, sets_active_context: true}]`,
			`catalog "k" is not enabled in mode "a"`},
		{"EntityTypeMismatch", `version: 1
modes: [{key: a, default: true}]
catalogs: [{id: k, entity_type: e, items: []}]
commands: [{id: c, tool: agent_set_active_entity, parameter: p, resolver: {catalog: k}, sets_active_context: true, active_entity_type: f}]`,
			`catalog "k" holds "e" entities`},
		{"SlashAliasClash", `version: 1
modes: [{key: a, default: true}]
commands:
  - {id: c, tool: agent_set_mode, parameter: p, resolver: {catalog: modes}, aliases: [d]}
  - {id: d, tool: agent_set_mode, parameter: p, resolver: {catalog: modes}}`,
			`/d already names command "d"`},
		{"ToolSchemaNotObject", `version: 1
modes: [{key: a, default: true}]
tools: [{name: t, description: d, impact: read, http: {url: "http://x/y"}, input_schema: {type: string}}]`,
			`tools[0].input_schema: must be an object schema`},
		{"ToolSchemaBroken", `version: 1
modes: [{key: a, default: true}]
tools: [{name: t, description: d, impact: read, http: {url: "http://x/y"}, input_schema: {type: object, properties: {x: {type: 7}}}}]`,
			`tools[0].input_schema: does not compile`},
		{"MCPServerNoTransport", `version: 1
modes: [{key: a, default: true, toolboxes: [t]}]
toolboxes: [{id: t, mcp_servers: [files, nope]}]
mcp_servers: [{name: files}]`,
			`mcp_servers[0]: needs a command (stdio) or a url`},
		{"HeaderEnvName", `version: 1
modes: [{key: a, default: true}]
tools: [{name: t, description: d, impact: read, http: {url: "http://x/y", headers_env: {Authorization: "TOKEN-1"}}}]`,
			`tools[0].http.headers_env.Authorization: "TOKEN-1" is not an environment variable name`},
		{"HeaderTwice", `version: 1
modes: [{key: a, default: true}]
tools: [{name: t, description: d, impact: read, http: {url: "http://x/y", headers: {X-Key: a}, headers_env: {X-Key: KEY}}}]`,
			`tools[0].http.headers_env.X-Key: also in headers`},
		{"HeaderBadName", `version: 1
modes: [{key: a, default: true}]
catalogs: [{id: k, entity_type: e, provider: {http: {url: "http://x/", headers: {"a b": c}}}}]`,
			`catalogs[0].provider.http.headers.a b: not a valid header name`},
		{"HeaderOverStdio", `version: 1
modes: [{key: a, default: true}]
mcp_servers: [{name: files, command: [x], headers_env: {Authorization: T}}]`,
			`mcp_servers[0]: headers are for a server over HTTP`},
		{"MCPServerUnknownRef", `version: 1
modes: [{key: a, default: true, toolboxes: [t]}]
toolboxes: [{id: t, mcp_servers: [nope]}]`,
			`toolboxes[0].mcp_servers[0]: unknown MCP server "nope"`},
		{"MCPServerBadImpact", `version: 1
modes: [{key: a, default: true}]
mcp_servers: [{name: files, command: [x], impact: {rm: sometimes}}]`,
			`mcp_servers[0].impact.rm: "sometimes"`},
		{"TargetModeOnExecutable", `version: 1
modes: [{key: a, default: true, toolboxes: [t]}, {key: b}]
toolboxes: [{id: t, catalogs: [modes], commands: [c]}]
commands: [{id: c, tool: agent_set_mode, parameter: p, resolver: {catalog: modes}, target_mode: b}]`,
			`commands[0].target_mode: only a launcher has a target mode`},
		{"TargetModeLacksCatalog", `version: 1
modes: [{key: a, default: true, toolboxes: [l]}, {key: b, toolboxes: [t]}]
toolboxes: [{id: l, commands: [browse]}, {id: t, commands: [c]}]
catalogs: [{id: k, entity_type: e, items: [{id: x, display_name: X}]}]
commands:
  - {id: c, tool: agent_set_active_entity, parameter: p, resolver: {catalog: k}, sets_active_context: true, active_entity_type: e}
  - {id: browse, kind: launcher, target_catalog: k, on_select: c, target_mode: b}`,
			`catalog "k" is not enabled in mode "b", the target mode of this launcher`},
		{"UnknownProvider", `version: 1
modes: [{key: a, default: true}]
commands: [{id: c, tool: agent_set_mode, parameter: p, resolver: {provider: crm}}]`,
			`unknown provider "crm"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.yaml), "x.yaml", nil)
			if cfg != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, %v; want error containing %q", cfg, err, tt.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`version: 1
modes: [{key: general, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], commands: [m], providers: [crm]}]
commands: [{id: m, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true}]`), "x.yaml", &Options{Providers: []string{"crm"}})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Modes[0]
	if m.ID != agentplane.ModeID("general") || !agentplane.IsModeID(m.ID) {
		t.Fatalf("derived id %q", m.ID)
	}
	if m.DisplayName != "general" || cfg.Commands[0].Kind != "executable" || cfg.Router.MaxOptions != DefaultMaxOptions {
		t.Fatalf("defaults not filled: %+v %+v", m, cfg.Commands[0])
	}
	if got := cfg.EntityTypeName("email_template"); got != "email template" {
		t.Fatalf("an unnamed entity type is shown as %q", got)
	}
}

func TestEntityTypeNames(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`version: 1
modes: [{key: general, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [c], commands: [open]}]
catalogs: [{id: c, entity_type: ddr, items: [{id: D-1, display_name: One}]}]
entity_types: {ddr: {display_name: design decision record}}
commands: [{id: open, tool: agent_set_active_entity, parameter: id, resolver: {catalog: c}, sets_active_context: true, active_entity_type: ddr}]`), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EntityTypeName("ddr") != "design decision record" || cfg.Commands[0].ActiveEntityName != "design decision record" {
		t.Fatalf("names: %v, command %+v", cfg.EntityTypes, cfg.Commands[0])
	}
}

func FuzzParse(f *testing.F) {
	data, _ := os.ReadFile("testdata/bad.yaml")
	f.Add(data)
	f.Add([]byte("version: 1\nmodes: [{key: a, default: true}]"))
	f.Add([]byte("a: &x [*x]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b, "f.yaml", nil)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned cfg=%v err=%v", cfg, err)
		}
	})
}

func TestExampleThreshold(t *testing.T) {
	base := "version: 1\nmodes: [{key: a, default: true}]\n"
	for _, c := range []struct {
		yaml, want string
		value      float64
	}{
		{"", "", DefaultExampleThreshold},
		{"router: {example_threshold: 0.35}", "", 0.35},
		{"router: {example_threshold: 1}", "", 1},
		{"router: {example_threshold: 0}", "router.example_threshold: must be greater than 0 and at most 1", 0},
		{"router: {example_threshold: -0.1}", "router.example_threshold: must be greater than 0 and at most 1", 0},
		{"router: {example_threshold: 1.01}", "router.example_threshold: must be greater than 0 and at most 1", 0},
		{"router: {example_threshold: .nan}", "router.example_threshold: must be greater than 0 and at most 1", 0},
		{"router: {example_threshold: high}", `router.example_threshold: expected a number, found "high"`, 0},
	} {
		cfg, err := Parse([]byte(base+c.yaml), "t.yaml", nil)
		if c.want == "" {
			if err != nil || cfg.Router.ExampleThreshold != c.value {
				t.Errorf("%q: %v, threshold %v", c.yaml, err, cfg.Router.ExampleThreshold)
			}
			continue
		}
		var ps Problems
		if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].String(), c.want) {
			t.Errorf("%q: want exactly one problem %q, got %v", c.yaml, c.want, err)
		}
	}
}

// TestHostileText: inputs that once grew without bound, were ignored or
// gave only "EOF" get a clear problem, with a line where there is one.
func TestHostileText(t *testing.T) {
	t.Parallel()
	// a billion laughs, in a tool's input schema: each level maps ten
	// names to the level before
	var bomb strings.Builder
	bomb.WriteString("version: 1\nmodes: [{key: m, default: true, toolboxes: [t]}]\ntoolboxes: [{id: t, tools: [x]}]\n")
	bomb.WriteString("tools:\n  - name: x\n    description: d\n    impact: read\n    risk: low\n    input_schema:\n      type: object\n")
	bomb.WriteString("      l0: &l0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, j: 1}\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&bomb, "      l%d: &l%d {a: *l%d, b: *l%d, c: *l%d, d: *l%d, e: *l%d, f: *l%d, g: *l%d, h: *l%d, i: *l%d, j: *l%d}\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	for name, c := range map[string]struct {
		in   string
		want string
	}{
		"AliasBomb":   {bomb.String(), "alias bomb"},
		"Empty":       {" \n\n", "the file is empty"},
		"SecondDoc":   {"version: 1\nmodes: []\n---\nmodes: []\n", "x.yaml:3: a second YAML document"},
		"UTF16":       {"\xff\xfev\x00", "x.yaml:1: the file is UTF-16"},
		"InvalidUTF8": {"version: 1\nmodes:\n  - key: caf\xe9\n", "x.yaml:3: invalid UTF-8 (byte 0xe9 at column 13)"},
		"LongTrigger": {strings.Replace(string(mustRead(t, "../demo/agentplane.yaml")), `"(switch|change|go|move) [over] to [the] {item} mode"`, `"`+strings.Repeat("w ", 2000)+`{item}"`, 1), "the limit is 512"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.in), "x.yaml", &Options{Tools: []string{"send_template"}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMCPPrefixCollisions: mounted tools are PREFIX_TOOL, and activity is
// by server membership; a prefix under which a mounted tool could take a
// built-in, configured or other server's tool name is refused.
func TestMCPPrefixCollisions(t *testing.T) {
	t.Parallel()
	base := "version: 1\nmodes: [{key: m, default: true, toolboxes: [t]}]\ntoolboxes: [{id: t, mcp_servers: [a]}]\n"
	for name, c := range map[string]struct{ yaml, want string }{
		"Builtin":    {"mcp_servers: [{name: a, prefix: agent, url: \"http://127.0.0.1:1/mcp\"}]\n", `"agent": a tool of this server could be named like the tool "agent_clear_active_entity"`},
		"Configured": {"tools: [{name: files_read, description: d, impact: read, risk: low, http: {url: \"http://x/\"}}]\nmcp_servers: [{name: a, prefix: files, url: \"http://127.0.0.1:1/mcp\"}]\n", `like the tool "files_read"`},
		"Servers":    {"mcp_servers: [{name: a, prefix: fs, url: \"http://127.0.0.1:1/mcp\"}, {name: b, prefix: fs_x, url: \"http://127.0.0.1:2/mcp\"}]\n", `could have the same names`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(base+c.yaml), "x.yaml", nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	if _, err := Parse([]byte(base+"mcp_servers: [{name: a, prefix: files, url: \"http://127.0.0.1:1/mcp\"}]\n"), "x.yaml", nil); err != nil {
		t.Fatalf("a prefix that collides with nothing: %v", err)
	}
}

// TestAuthKeys: keys are given by digest or environment variable, never
// in the file; every malformed entry is named.
func TestAuthKeys(t *testing.T) {
	t.Parallel()
	base := "version: 1\nmodes: [{key: a, default: true}]\n"
	digest := strings.Repeat("ab", 32)
	cfg, err := Parse([]byte(base+"auth:\n  keys:\n    - {user_id: alice, roles: [admin], key_sha256: "+digest+"}\n    - {user_id: bob, key_env: BOB_KEY}\n"), "t.yaml", nil)
	if err != nil || len(cfg.Auth.Keys) != 2 || cfg.Auth.Keys[0].KeySHA256 != digest || cfg.Auth.Keys[0].Roles[0] != "admin" || cfg.Auth.Keys[1].KeyEnv != "BOB_KEY" {
		t.Fatalf("%+v %v", cfg.Auth, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"{user_id: a, key: s3cret}", "t.yaml:5: auth.keys[0].key: keys are not written in configuration"},
		{"{user_id: a}", "auth.keys[0]: needs key_sha256"},
		{"{user_id: a, key_env: X, key_sha256: " + digest + "}", "auth.keys[0]: has both key_sha256 and key_env"},
		{"{user_id: a, key_sha256: ABC}", "auth.keys[0].key_sha256: must be 64 lowercase hex digits"},
		{"{user_id: a, key_env: 'A B'}", `auth.keys[0].key_env: "A B" is not an environment variable name`},
		{"{user_id: '', key_env: K}", `auth.keys[0].user_id: "": must be`},
		{"{user_id: local, key_env: K}", `auth.keys[0].user_id: "local" is the terminal's own principal`},
		{"{user_id: 'https://idp.example#alice', key_env: K}", `auth.keys[0].user_id: "https://idp.example#alice": must be`},
		{"{user_id: a, roles: [''], key_env: K}", "auth.keys[0].roles[0]: empty"},
		{"{user_id: a, key_sha256: " + digest + "}\n    - {user_id: b, key_sha256: " + digest + "}", "auth.keys[1].key_sha256: the same key as auth.keys[0]"},
	} {
		_, err := Parse([]byte(base+"auth:\n  keys:\n    - "+c.yaml+"\n"), "t.yaml", nil)
		var ps Problems
		if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].String(), c.want) {
			t.Errorf("%s: want exactly one problem %q, got %v", c.yaml, c.want, err)
		}
	}
}
