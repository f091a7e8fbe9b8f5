package servetest

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Fleet is serve processes on fixed loopback ports, to be killed and
// started again where their clients expect them.
type Fleet struct {
	Ports []int // instance i's port

	t     testing.TB
	bin   string
	args  []string
	mu    sync.Mutex
	procs []*exec.Cmd
}

// NewFleet returns n instances of the binary, with the arguments after
// serve --addr, on free ports; none runs yet. Those running when the test
// ends are killed.
func NewFleet(t testing.TB, bin string, n int, args ...string) *Fleet {
	f := &Fleet{Ports: FreePorts(t, n), t: t, bin: bin, args: args, procs: make([]*exec.Cmd, n)}
	t.Cleanup(func() {
		for i := range n {
			f.Kill(i)
		}
	})
	return f
}

// URL is instance i's base URL.
func (f *Fleet) URL(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", f.Ports[i]) }

// Start starts instance i on its port and waits until it serves.
func (f *Fleet) Start(i int) {
	f.t.Helper()
	cmd := exec.Command(f.bin, append([]string{"serve", "--addr", fmt.Sprintf("127.0.0.1:%d", f.Ports[i])}, f.args...)...)
	stdout, _ := cmd.StdoutPipe()
	var stderr SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), "serving http") {
		cmd.Process.Kill()
		cmd.Wait()
		f.t.Fatalf("instance %d did not start: %q\n%s", i, sc.Text(), stderr.String())
	}
	go io.Copy(io.Discard, stdout) // ends when the process does
	f.mu.Lock()
	f.procs[i] = cmd
	f.mu.Unlock()
}

// Kill SIGKILLs instance i, if it runs, and waits for it.
func (f *Fleet) Kill(i int) {
	f.mu.Lock()
	cmd := f.procs[i]
	f.procs[i] = nil
	f.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
}

// Pids are the running instances' process ids.
func (f *Fleet) Pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, p := range f.procs {
		if p != nil && p.Process != nil {
			out = append(out, p.Process.Pid)
		}
	}
	return out
}
