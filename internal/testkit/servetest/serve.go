package servetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
)

// serving is serve's first line: the URL it serves, then what it runs.
var serving = regexp.MustCompile(`serving (http://\S+) \(configuration .+, store .+, .+\)`)

// Serve runs the binary's serve on a free loopback port and returns its
// base URL, the process and its standard output past the first line; the
// process is killed when the test ends.
func Serve(t testing.TB, bin string, args ...string) (string, *exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	sc, _, _ := StartProcess(t, cmd)
	return servingURL(t, sc.Text()), cmd, sc
}

// Instance is a serve process started by ServeEnv.
type Instance struct {
	URL    string      // its base URL
	Stderr *SyncBuffer // what it printed on standard error
}

// ServeEnv starts serve with the configuration and arguments, with env
// (NAME=VALUE) added to the environment, and waits until it serves; it is
// killed when the test ends.
func ServeEnv(t testing.TB, bin, cfg string, env []string, args ...string) Instance {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--config", cfg}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	sc, stdout, stderr := StartProcess(t, cmd)
	url := servingURL(t, sc.Text())
	go io.Copy(io.Discard, stdout) // ends when the process does
	return Instance{URL: url, Stderr: stderr}
}

// servingURL is the URL serve's first line names, or fails t.
func servingURL(t testing.TB, line string) string {
	t.Helper()
	m := serving.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve printed %q", line)
	}
	return m[1]
}

// StartProcess starts cmd, killed when the test ends, and waits for the
// first line it prints: the scanner holds it; stdout is the rest, stderr
// what it printed there.
func StartProcess(t testing.TB, cmd *exec.Cmd) (sc *bufio.Scanner, stdout io.Reader, stderr *SyncBuffer) {
	t.Helper()
	out, _ := cmd.StdoutPipe()
	stderr = &SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc = bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Wait()
		t.Fatalf("%s printed nothing\n%s", filepath.Base(cmd.Path), stderr.String())
	}
	return sc, out, stderr
}

// NewSession opens a session on a serve at url and returns its id.
func NewSession(t testing.TB, url string) string {
	t.Helper()
	resp, body, err := PostJSON(url+"/v1/sessions", map[string]string{})
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("%v %s", err, body)
	}
	var created struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(body, &created)
	return created.SessionID
}

// PostJSON posts body as JSON and returns the response and its body read
// in full.
func PostJSON(url string, body any) (*http.Response, []byte, error) {
	raw, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}

// Call sends a request, with key as its bearer key where it is not empty
// and the headers (name, value pairs; "Host" sets the request's host), and
// returns the status and body.
func Call(t testing.TB, method, url, key string, body string, header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// StoredChain opens the database (SQLite file or PostgreSQL URL) after the
// processes that wrote it are gone and returns the session's audit chain,
// which must open cleanly and verify.
func StoredChain(t testing.TB, db, session string) []audit.Record {
	t.Helper()
	var st store.Store
	var err error
	if plane.IsPostgres(db) {
		st, err = postgres.Open(context.Background(), db, nil)
	} else {
		st, err = sqlite.Open(context.Background(), db, nil)
	}
	if err != nil {
		t.Fatalf("the database does not open cleanly: %v", err)
	}
	defer st.Close()
	recs, err := st.Records(context.Background(), session, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// FreePorts returns n loopback ports nothing listens on now.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// FreeAddr returns a loopback address nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// SyncBuffer is a bytes.Buffer safe to read while a process writes it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Patiently sends a request as a patient client does: one that found no
// instance (a transport error, 502, 503, 504) or whose request is still
// running elsewhere (409 request_in_progress) is sent again, with the same
// Idempotency-Key, to whichever base URL url gives then, until it gets an
// answer or a minute has passed (then the status is 0 and the body says
// what the last attempt got). The headers are name, value pairs.
func Patiently(c *http.Client, url func() string, method, path, key, body string, header ...string) (int, []byte) {
	deadline := time.Now().Add(time.Minute)
	var last string
	for {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, url()+path, rd)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err == nil {
			raw, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			retry := resp.StatusCode == 502 || resp.StatusCode == 503 || resp.StatusCode == 504 ||
				resp.StatusCode == 409 && bytes.Contains(raw, []byte(agentplane.CodeRequestInProgress))
			if rerr == nil && !retry {
				return resp.StatusCode, raw
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, raw)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return 0, []byte(method + " " + path + " got no answer in a minute: " + last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
