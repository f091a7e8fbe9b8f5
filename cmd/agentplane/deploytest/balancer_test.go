package deploytest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// The balancers of the deployment tests run the configurations shipped in
// deploy/ as they are: HAProxy reads deploy/haproxy.cfg unchanged, the
// addresses in its environment; nginx reads deploy/nginx.conf with the
// addresses filled in (as envsubst does in deploy/compose.yaml), its pid
// and error log in the test's directory.

// deployDir is the repository's deploy/ directory.
const deployDir = "../../../deploy"

// lb is a balancer in front of the instances.
type lb struct {
	name string
	url  string
	cmd  *exec.Cmd
	out  *servetest.SyncBuffer
	// reload makes it read its configuration again the way an operator
	// does: HAProxy's master gets SIGUSR2, nginx's SIGHUP.
	reload func()
}

// balancerBin finds a balancer's binary (PATH, then /usr/sbin), or skips
// the test — or fails it when AGENTPLANE_REQUIRE_BALANCER is set.
func balancerBin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	if os.Getenv("AGENTPLANE_REQUIRE_BALANCER") != "" {
		t.Fatalf("%s is not installed (apt-get install %s)", name, name)
	}
	t.Skipf("%s is not installed (apt-get install %s)", name, name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// instanceVars are the variables deploy/'s configurations take the
// instances' addresses from, filled with addrs (fewer than three
// instances fill the rest with the last: a server listed twice).
func instanceVars(addrs []string) map[string]string {
	vars := map[string]string{}
	for i := range 3 {
		vars[fmt.Sprintf("AGENTPLANE_%d", i+1)] = addrs[min(i, len(addrs)-1)]
	}
	return vars
}

// haproxyLB starts HAProxy (master-worker) with deploy/haproxy.cfg in
// front of addrs; it is stopped when the test ends.
func haproxyLB(t *testing.T, addrs []string) *lb {
	t.Helper()
	bin := balancerBin(t, "haproxy")
	front := fmt.Sprintf("127.0.0.1:%d", servetest.FreePorts(t, 1)[0])
	cmd := exec.Command(bin, "-W", "-db", "-f", filepath.Join(deployDir, "haproxy.cfg"))
	cmd.Env = os.Environ()
	for k, v := range instanceVars(addrs) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "AGENTPLANE_BIND="+front)
	b := &lb{name: "HAProxy", url: "http://" + front, cmd: cmd}
	b.reload = func() { cmd.Process.Signal(syscall.SIGUSR2) }
	b.start(t, front)
	return b
}

// nginxLB starts nginx with deploy/nginx.conf, the addresses filled in,
// in front of addrs; it is stopped when the test ends.
func nginxLB(t *testing.T, addrs []string) *lb {
	t.Helper()
	bin := balancerBin(t, "nginx")
	front := fmt.Sprintf("127.0.0.1:%d", servetest.FreePorts(t, 1)[0])
	vars := instanceVars(addrs)
	vars["AGENTPLANE_LISTEN"] = front
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(envsubst(t, filepath.Join(deployDir, "nginx.conf"), vars)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf, "-p", dir, "-e", filepath.Join(dir, "error.log"),
		"-g", "daemon off; pid "+filepath.Join(dir, "nginx.pid")+";")
	b := &lb{name: "nginx", url: "http://" + front, cmd: cmd}
	b.reload = func() { cmd.Process.Signal(syscall.SIGHUP) }
	b.start(t, front)
	return b
}

// envsubst reads a file and fills in its ${AGENTPLANE_…} from vars, as
// `envsubst '$AGENTPLANE_1 …'` does in deploy/compose.yaml; every such
// name the file uses must be given (nginx's own $variables are left
// alone).
func envsubst(t *testing.T, path string, vars map[string]string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := shippedVar.ReplaceAllStringFunc(string(raw), func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			t.Fatalf("%s uses %s, which the test does not set", path, m)
		}
		return v
	})
	return out
}

func (b *lb) start(t *testing.T, front string) {
	t.Helper()
	b.out = &servetest.SyncBuffer{}
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	// a process group of its own: its workers (an nginx worker outlives
	// its master's SIGKILL; an old HAProxy worker drains after a reload)
	// are ended with the master it started
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b.cmd.WaitDelay = 5 * time.Second
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		b.cmd.Wait()
	})
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", front); err == nil {
			c.Close()
			return
		}
		if i == 250 {
			t.Fatalf("%s did not listen on %s: %s", b.name, front, b.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addrs are loopback HOST:PORTs of ports.
func addrs(ports []int) []string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return out
}

// shippedVar is a variable of deploy/'s files: ${AGENTPLANE_…}.
var shippedVar = regexp.MustCompile(`\$\{(AGENTPLANE_[A-Z0-9_]+)\}`)

// shippedVars are the variables a deploy/ file uses, in order.
func shippedVars(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range shippedVar.FindAllStringSubmatch(string(raw), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}
