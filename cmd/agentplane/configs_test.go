package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// repositoryConfigs are the configuration files the repository holds for
// people to copy: the demo and every example's.
func repositoryConfigs(t *testing.T) []string {
	t.Helper()
	examples, err := filepath.Glob("../../examples/*/agentplane.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example configurations: %v", err)
	}
	return append([]string{"../../demo/agentplane.yaml"}, examples...)
}

// exampleEnv is the environment the examples' configurations read: the
// help desk's service key and its people's API keys.
var exampleEnv = map[string]string{"DESK_TOKEN": "desk-secret-7f3c9a", "DESK_KEY_DANA": "dana-key-0123456789",
	"DESK_KEY_FOX": "fox-key-0123456789", "DESK_KEY_WALTER": "walter-key-0123456789"}

// TestRepositoryConfigurationsWorkWhenCopied: every configuration in the
// repository, copied elsewhere as a newcomer would, validates and serves
// with --config; a copy of the demo's sends through the outbox the binary
// ships, as the embedded demo does.
func TestRepositoryConfigurationsWorkWhenCopied(t *testing.T) {
	t.Parallel()
	bin := servetest.Binary(t)
	for _, src := range repositoryConfigs(t) {
		name := strings.TrimPrefix(src, "../../")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg := filepath.Join(dir, "agentplane.yaml")
			if err := os.WriteFile(cfg, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runEnv(t, exampleEnv, "", "validate", "--config", cfg)
			if code != 0 || !strings.Contains(out, "valid (") {
				t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
			}
			var env []string
			for k, v := range exampleEnv {
				env = append(env, k+"="+v)
			}
			srv := servetest.ServeEnv(t, bin, cfg, env, "--db", filepath.Join(dir, "a.db"))
			key := "" // the local user, where the configuration has no keys
			if strings.Contains(string(raw), "key_env: DESK_KEY_DANA") {
				key = exampleEnv["DESK_KEY_DANA"]
			}
			st, body := servetest.Call(t, "POST", srv.URL+"/v1/sessions", key, `{}`)
			var created struct {
				SessionID string `json:"session_id"`
			}
			if st != 201 || json.Unmarshal(body, &created) != nil {
				t.Fatalf("create session: %d %s", st, body)
			}
			if st, body := servetest.Call(t, "POST", srv.URL+"/v1/sessions/"+created.SessionID+"/turns", key, `{"text":"hello there"}`); st != 200 {
				t.Fatalf("a turn: %d %s", st, body)
			}
			if name != "demo/agentplane.yaml" {
				return
			}
			session, _ := askToSend(t, srv.URL, "")
			st, body = servetest.Call(t, "POST", srv.URL+"/v1/sessions/"+session+"/turns", "", `{"text":"yes"}`)
			var yes struct {
				Result struct {
					Status string          `json:"status"`
					Output json.RawMessage `json:"output"`
				} `json:"result"`
			}
			if st != 200 || json.Unmarshal(body, &yes) != nil || yes.Result.Status != "success" || !strings.Contains(string(yes.Result.Output), `"send_id":1`) {
				t.Fatalf("the copied demo's send: %d %s", st, body)
			}
		})
	}
}
