package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// TestReloadTwoInstancesOnePostgres: two serve processes on one
// PostgreSQL both serve the new configuration after each reloads — one on
// SIGHUP, the other on POST /v1/admin/reload — and a file with a problem
// is refused with its line and changes nothing.
func TestReloadTwoInstancesOnePostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	bin := servetest.Binary(t)
	cfg := filepath.Join(t.TempDir(), "agentplane.yaml")
	if err := os.WriteFile(cfg, demo.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
	type proc struct {
		cmd *exec.Cmd
		url string
		out func() string // the next line it prints
	}
	start := func() proc {
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--config", cfg, "--db", db)
		sc, _, _ := servetest.StartProcess(t, cmd)
		i := strings.Index(sc.Text(), "serving http://")
		if i < 0 {
			t.Fatalf("serve printed %q", sc.Text())
		}
		return proc{cmd: cmd, url: strings.Fields(sc.Text()[i+len("serving "):])[0], out: func() string {
			if !sc.Scan() {
				return ""
			}
			return sc.Text()
		}}
	}
	a, b := start(), start()
	modes := func(p proc) string {
		st, body := servetest.Call(t, "GET", p.url+"/v1/modes", "", "")
		if st != 200 {
			t.Fatalf("modes: %d %s", st, body)
		}
		return string(body)
	}
	if !strings.Contains(modes(a), `"sales"`) || !strings.Contains(modes(b), `"sales"`) {
		t.Fatal("the demo's modes are not served")
	}
	changed := bytes.Replace(demo.YAML, []byte("  - key: sales\n"), []byte("  - key: selling\n"), 1)
	if err := os.WriteFile(cfg, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	a.cmd.Process.Signal(syscall.SIGHUP)
	if line := a.out(); !strings.Contains(line, "configuration reloaded") {
		t.Fatalf("after SIGHUP: %q", line)
	}
	st, body := servetest.Call(t, "POST", b.url+"/v1/admin/reload", "", "")
	var got struct{ Config string }
	if json.Unmarshal(body, &got); st != 200 || len(got.Config) != 64 {
		t.Fatalf("POST /v1/admin/reload: %d %s", st, body)
	}
	for _, p := range []proc{a, b} {
		if m := modes(p); strings.Contains(m, `"sales"`) || !strings.Contains(m, `"selling"`) {
			t.Fatalf("%s after its reload serves %s", p.url, m)
		}
	}
	// a file with a problem: refused with its line, nothing changed
	bad := bytes.Replace(changed, []byte("  - key: selling\n"), []byte("  - key: selling\n    toolboxes_typo: []\n"), 1)
	if err := os.WriteFile(cfg, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	st, body = servetest.Call(t, "POST", b.url+"/v1/admin/reload", "", "")
	if st != 400 || !strings.Contains(string(body), "agentplane.yaml:") || !strings.Contains(string(body), "toolboxes_typo") {
		t.Fatalf("a bad file: %d %s", st, body)
	}
	if m := modes(b); !strings.Contains(m, `"selling"`) {
		t.Fatalf("a refused reload changed what is served: %s", m)
	}
}
