package deploytest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// The deployment kit (deploy/) as an operator uses it: the balancers
// drain on reload, the systemd unit and the compose file run the binary
// with flags it has. TestDeploymentBehindABalancer runs the balancers
// under load and kills.

// TestBalancersDrainOnReload: reloading HAProxy or nginx, as shipped,
// cuts nothing — an event stream open through the balancer keeps
// receiving events on its connection, and a request in flight finishes —
// while new requests reach the instance through the new configuration.
func TestBalancersDrainOnReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts HAProxy, nginx and serve")
	}
	arrived := make(chan struct{}, 4)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(time.Second)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"report": "ready"}`)
	}))
	defer slow.Close()
	cfg := filepath.Join(t.TempDir(), "slow.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [report]}]
tools:
  - {name: report, description: "A report that takes a while.", impact: read, http: {url: %q}}
`, slow.URL)), 0o644)
	inst := servetest.ServeEnv(t, servetest.Binary(t), cfg, nil, "--db", filepath.Join(t.TempDir(), "drain.db"))
	addr := strings.TrimPrefix(inst.URL, "http://")
	for _, b := range []*lb{haproxyLB(t, []string{addr}), nginxLB(t, []string{addr})} {
		t.Run(b.name, func(t *testing.T) {
			c := &client{url: b.url, http: &http.Client{Timeout: 20 * time.Second}}
			st, raw := c.do("POST", "/v1/sessions", "", `{}`)
			var created struct {
				SessionID string `json:"session_id"`
			}
			if st != 201 || json.Unmarshal(raw, &created) != nil {
				t.Fatalf("create a session: %d %s", st, raw)
			}
			id := created.SessionID
			resp, err := http.Get(b.url + "/v1/sessions/" + id + "/events")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("the stream: %v %v", err, resp)
			}
			defer resp.Body.Close()
			ids := make(chan int64, 16)
			go func() {
				defer close(ids)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						ids <- n
					}
				}
			}()
			if n := <-ids; n != 1 {
				t.Fatalf("the stream began with %d", n)
			}
			done := make(chan string, 1)
			go func() {
				st, raw := c.do("POST", "/v1/sessions/"+id+"/intents", "", `{"type":"action_call","origin":"user","action":"report"}`)
				done <- fmt.Sprintf("%d %s", st, raw)
			}()
			<-arrived // the request is in flight at the instance
			b.reload()
			if got := <-done; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"status":"success"`) {
				t.Fatalf("the request in flight across the reload: %s\n%s", got, b.out.String())
			}
			// a new connection, through the new configuration
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections) // its connection would outlive the test, held by a draining balancer
			fresh := &client{url: b.url, http: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
			st, raw = fresh.do("POST", "/v1/sessions/"+id+"/turns", "", `{"text":"hello"}`)
			var turn struct{ Seq int64 }
			if st != 200 || json.Unmarshal(raw, &turn) != nil {
				t.Fatalf("a turn after the reload: %d %s", st, raw)
			}
			for n := range ids {
				if n == turn.Seq {
					return // the stream opened before the reload got it
				}
			}
			t.Fatalf("the stream opened before the reload ended before the turn's event %d\n%s", turn.Seq, b.out.String())
		})
	}
}

// unitService reads the [Service] section of deploy/agentplane@.service.
func unitService(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "agentplane@.service"))
	if err != nil {
		t.Fatal(err)
	}
	out, section := map[string]string{}, ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			out[k] = v
		}
	}
	return out
}

// keyedConfig writes a configuration with one API key, read from
// AGENTPLANE_KEY_ALICE, as a deployment behind a balancer has.
func keyedConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentplane.yaml")
	os.WriteFile(p, []byte(`version: 1
modes:
  - {key: general, display_name: General, default: true, toolboxes: [core]}
  - {key: ddr, display_name: DDR, toolboxes: [core]}
toolboxes: [{id: core, catalogs: [modes], commands: [set_mode]}]
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true, triggers: ["switch to {item} mode"]}
auth:
  keys:
    - {user_id: alice, key_env: AGENTPLANE_KEY_ALICE}
`), 0o644)
	return p
}

const aliceDeployKey = "alice-deploy-key-0123456789"

// TestSystemdUnit: deploy/agentplane@.service verifies without a warning
// (systemd-analyze, where installed), and its ExecStart — the binary's
// path, the port (%i) and the configuration's path filled in — serves
// with the environment its EnvironmentFile gives, answers through its
// key, and stops cleanly on its KillSignal within its TimeoutStopSec.
func TestSystemdUnit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := servetest.Binary(t)
	unit := unitService(t)
	exec0 := strings.Fields(unit["ExecStart"])
	if len(exec0) < 2 || exec0[0] != "/usr/local/bin/agentplane" || strings.ContainsAny(unit["ExecStart"], `"'\`) {
		t.Fatalf("ExecStart %q", unit["ExecStart"])
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		dir := t.TempDir()
		raw, _ := os.ReadFile(filepath.Join(deployDir, "agentplane@.service"))
		abs, _ := filepath.Abs(bin)
		os.WriteFile(filepath.Join(dir, "agentplane@.service"), []byte(strings.ReplaceAll(string(raw), "/usr/local/bin/agentplane", abs)), 0o644)
		os.Symlink("agentplane@.service", filepath.Join(dir, "agentplane@8081.service"))
		out, err := exec.Command(sa, "verify", filepath.Join(dir, "agentplane@8081.service")).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else if os.Getenv("AGENTPLANE_REQUIRE_BALANCER") != "" { // .ci/run installs it with the balancers
		t.Fatal("systemd-analyze is not installed (apt-get install systemd), and AGENTPLANE_REQUIRE_BALANCER is set")
	} else {
		t.Log("systemd-analyze is not installed: the unit's syntax is not verified")
	}

	// the environment file, as the unit's comment says to write it
	db := filepath.Join(t.TempDir(), "agentplane.db")
	envFile := "AGENTPLANE_DB=" + db + "\nAGENTPLANE_KEY_ALICE=" + aliceDeployKey + "\n"
	env := strings.Split(strings.TrimSpace(envFile), "\n")
	cfg := keyedConfig(t)
	port := strconv.Itoa(servetest.FreePorts(t, 1)[0])
	var args []string
	for _, a := range exec0[1:] {
		a = strings.ReplaceAll(a, "%i", port)
		if a == "/etc/agentplane/agentplane.yaml" {
			a = cfg
		}
		args = append(args, a)
	}
	// the check the README runs before a start
	check := exec.Command(bin, "validate", "--config", cfg, "--env")
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("validate --env: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir() // WorkingDirectory, the StateDirectory
	cmd.Env = append(os.Environ(), env...)
	sc, stdout, stderr := servetest.StartProcess(t, cmd)
	if !strings.Contains(sc.Text(), "serving http://127.0.0.1:"+port) || !strings.Contains(sc.Text(), "1 API key(s)") {
		t.Fatalf("ExecStart printed %q\n%s", sc.Text(), stderr.String())
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stdout); rest <- string(b) }()
	url := "http://127.0.0.1:" + port
	if st, body := servetest.Call(t, "GET", url+"/readyz", "", ""); st != 200 || string(body) != `{"status":"ready"}`+"\n" {
		t.Errorf("readyz without a key: %d %s", st, body)
	}
	if st, body := servetest.Call(t, "POST", url+"/v1/sessions", aliceDeployKey, `{}`); st != 201 {
		t.Errorf("a session with the key: %d %s", st, body)
	}
	if unit["KillSignal"] != "SIGTERM" {
		t.Fatalf("KillSignal %q", unit["KillSignal"])
	}
	limit, err := time.ParseDuration(unit["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec %q: %v", unit["TimeoutStopSec"], err)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	took := time.Since(start)
	if out := <-rest; err != nil || !strings.Contains(out, "agentplane: stopped") || took >= limit {
		t.Fatalf("on SIGTERM: %v after %v (TimeoutStopSec %v)\n%s%s", err, took, limit, out, stderr.String())
	}
}

// TestComposeFile: deploy/compose.yaml's instances run the binary with
// flags it has — their command lines, the configuration, database and
// port filled in, served on the test's PostgreSQL — behind haproxy.cfg
// with the compose file's own environment for it; every variable the
// balancers' configurations read is set by their service (and, for
// nginx, substituted by its entrypoint).
func TestComposeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Entrypoint  []string          `yaml:"entrypoint"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	// the balancers read what their services set
	for name, file := range map[string]string{"haproxy": "haproxy.cfg", "nginx": "nginx.conf"} {
		svc, ok := compose.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if !slices.ContainsFunc(svc.Volumes, func(v string) bool { return strings.HasPrefix(v, "./"+file+":") }) {
			t.Errorf("%s does not mount ./%s: %v", name, file, svc.Volumes)
		}
		for _, v := range shippedVars(t, file) {
			if _, ok := svc.Environment[v]; !ok {
				t.Errorf("%s reads %s, which service %s does not set", file, v, name)
			}
			if name == "nginx" && !strings.Contains(strings.Join(svc.Entrypoint, " "), "$$"+v) {
				t.Errorf("nginx's entrypoint does not substitute %s: %q", v, svc.Entrypoint)
			}
		}
	}

	bin := servetest.Binary(t)
	db := pgtest.Schema(t)
	cfg := keyedConfig(t)
	hosts := map[string]string{} // service:8080 -> where it runs here
	for _, name := range []string{"agentplane1", "agentplane2", "agentplane3"} {
		svc, ok := compose.Services[name]
		if !ok || !strings.Contains(svc.Image, "agentplane") || len(svc.Command) == 0 || svc.Command[0] != "serve" {
			t.Fatalf("service %s: %+v", name, svc)
		}
		if !slices.Contains(svc.Volumes, "./agentplane.yaml:/data/agentplane.yaml:ro") {
			t.Errorf("%s does not mount the configuration it names: %v", name, svc.Volumes)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", servetest.FreePorts(t, 1)[0])
		args := slices.Clone(svc.Command)
		for i := 1; i < len(args); i++ {
			switch args[i-1] {
			case "--config":
				if args[i] != "/data/agentplane.yaml" {
					t.Errorf("%s: --config %s is not the mounted file", name, args[i])
				}
				args[i] = cfg
			case "--addr":
				args[i] = addr // 0.0.0.0:8080 in the container
			case "--db":
				if !strings.HasPrefix(args[i], "postgres://") || !strings.Contains(args[i], "@postgres:5432/") {
					t.Errorf("%s: --db %s is not the postgres service", name, args[i])
				}
				args[i] = db
			}
		}
		hosts[name+":8080"] = addr
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		for k, v := range svc.Environment {
			cmd.Env = append(cmd.Env, k+"="+strings.ReplaceAll(v, "${AGENTPLANE_KEY_ALICE}", aliceDeployKey))
		}
		sc, stdout, stderr := servetest.StartProcess(t, cmd)
		if !strings.Contains(sc.Text(), "serving http://"+addr) {
			t.Fatalf("%s printed %q\n%s", name, sc.Text(), stderr.String())
		}
		go io.Copy(io.Discard, stdout)
	}
	// HAProxy with the compose file's environment for it, the services'
	// names resolved to where they run here
	env := compose.Services["haproxy"].Environment
	var servers []string
	for i := 1; i <= 3; i++ {
		servers = append(servers, hosts[env[fmt.Sprintf("AGENTPLANE_%d", i)]])
	}
	if slices.Contains(servers, "") {
		t.Fatalf("haproxy's environment names instances compose does not run: %v", env)
	}
	b := haproxyLB(t, servers)
	c := &client{url: b.url, http: &http.Client{Timeout: 20 * time.Second}}
	st, body := c.do("POST", "/v1/sessions", "", `{}`, "Authorization", "Bearer "+aliceDeployKey)
	var created struct {
		SessionID string `json:"session_id"`
	}
	if st != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("a session through HAProxy: %d %s", st, body)
	}
	for range 3 { // round robin: each instance answers one
		st, body = c.do("POST", "/v1/sessions/"+created.SessionID+"/turns", "", `{"text":"switch to ddr mode"}`, "Authorization", "Bearer "+aliceDeployKey)
		if st != 200 || !strings.Contains(string(body), `"mode":"ddr"`) {
			t.Fatalf("a turn through HAProxy: %d %s", st, body)
		}
	}
	if st, _ := c.do("POST", "/v1/sessions", "", `{}`); st != 401 {
		t.Errorf("no key through HAProxy: %d", st)
	}
}
