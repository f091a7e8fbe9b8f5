package servetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/demo"
)

// Outbox is the far end of the demo's send tool made an HTTP tool: a
// service that counts the sends it gets. Its /slow path is a report that
// takes a while (a workflow is still running it when serve dies).
type Outbox struct {
	URL string // its base URL; sends go to it

	mu    sync.Mutex
	sends []string
}

// NewOutbox starts an outbox, closed when the test ends, that holds each
// send for hold before it answers, so that concurrent requests overlap.
func NewOutbox(t testing.TB, hold time.Duration) *Outbox {
	o := &Outbox{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(1500 * time.Millisecond)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"report": "ready"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		o.sends = append(o.sends, string(body))
		o.mu.Unlock()
		time.Sleep(hold)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sent": true}`)
	}))
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	return o
}

// Count returns how many sends arrived.
func (o *Outbox) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.sends)
}

// SendOverHTTP returns the demo configuration y with its send tool as an
// HTTP tool to url instead of the binary's outbox program.
func SendOverHTTP(t testing.TB, y, url string) string {
	t.Helper()
	program := "    program: " + demo.Program + "\n"
	if !strings.Contains(y, program) {
		t.Fatal("the demo configuration changed: its send tool is not on the outbox program")
	}
	return strings.Replace(y, program, fmt.Sprintf("    http: {url: %q}\n", url), 1)
}
