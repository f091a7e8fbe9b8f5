package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/llmtest"
)

// secretsConfig reads a secret from the environment in every place a
// configuration can: two API keys, an HTTP tool's two secret headers, a
// catalog provider's, an MCP server's and the LLM's key.
const secretsConfig = `version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes, tickets], tools: [send]}]
catalogs:
  - id: tickets
    display_name: Tickets
    provider: {http: {url: "http://127.0.0.1:1/tickets", headers_env: {X-Token: SEC_PROVIDER}}}
tools:
  - {name: send, description: Send it., impact: external, http: {url: "http://127.0.0.1:1/send", headers_env: {Authorization: SEC_TOOL_AUTH, X-Other: SEC_TOOL_OTHER}}}
mcp_servers:
  - {name: files, url: "http://127.0.0.1:1/mcp", headers_env: {Authorization: SEC_MCP}}
llm: {base_url: "%s", model: test-model, api_key_env: SEC_LLM}
auth:
  keys:
    - {user_id: ann, key_env: SEC_KEY_ANN}
    - {user_id: bob, key_env: SEC_KEY_BOB}
`

// secretVars are the variables secretsConfig reads, each with where.
var secretVars = map[string]string{
	"SEC_KEY_ANN":    "auth.keys[0].key_env (user ann)",
	"SEC_KEY_BOB":    "auth.keys[1].key_env (user bob)",
	"SEC_TOOL_AUTH":  "tools[0].http.headers_env.Authorization",
	"SEC_TOOL_OTHER": "tools[0].http.headers_env.X-Other",
	"SEC_PROVIDER":   "catalogs[0].provider.http.headers_env.X-Token",
	"SEC_MCP":        "mcp_servers[0].headers_env.Authorization",
	"SEC_LLM":        "llm.api_key_env",
}

// validate checks a configuration without its secrets: every variable
// that is not set is a warning, all of them at once, and the file is
// still valid; with --env, and at serve, each is an error, all of them
// at once. Walked for every variable left unset alone, and for all.
func TestValidateWithoutSecrets(t *testing.T) {
	t.Parallel()
	llmSrv := llmtest.New(t)
	cfg := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(secretsConfig, llmSrv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{"all": nil}
	for name := range secretVars {
		cases[name] = []string{name}
	}
	for unset, names := range cases {
		t.Run("Unset_"+unset, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for name := range secretVars {
				env[name] = "set-value-0123456789-" + name
			}
			if names == nil { // all unset
				env = map[string]string{}
				for name := range secretVars {
					names = append(names, name)
				}
			}
			for _, n := range names {
				delete(env, n)
			}
			out, errOut, code := runEnv(t, env, "", "validate", "--config", cfg)
			if code != 0 || !strings.Contains(out, "valid (1 modes") {
				t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
			}
			if got := strings.Count(out, "warning: "); got != len(names) {
				t.Errorf("validate: %d warnings for %d unset variables:\n%s", got, len(names), out)
			}
			if !strings.Contains(out, "llm: ") {
				t.Errorf("validate says nothing of the LLM:\n%s", out)
			}
			out, _, code = runEnv(t, env, "", "validate", "--config", cfg, "--env")
			if code != 1 || strings.Contains(out, "warning: ") || !strings.Contains(out, "environment variable(s) not set") {
				t.Errorf("validate --env: exit %d\n%s", code, out)
			}
			_, serveErr, serveCode := runEnv(t, env, "", "serve", "--config", cfg, "--addr", "127.0.0.1:0")
			if serveCode != 1 {
				t.Errorf("serve: exit %d\n%s", serveCode, serveErr)
			}
			for name, where := range secretVars {
				line := where + ": environment variable " + name + " is not set"
				want := !strings.Contains(env[name], "set-value")
				for what, text := range map[string]string{"validate --env": out, "serve": serveErr} {
					if strings.Contains(text, line) != want {
						t.Errorf("%s names %s: %v, want %v:\n%s", what, name, !want, want, text)
					}
				}
			}
		})
	}
}
