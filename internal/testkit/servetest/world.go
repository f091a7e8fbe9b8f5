package servetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/workflow"
)

// World is the service the external tools act on: it acts once per
// Idempotency-Key and records every request with the session it came
// from. Each request waits a random moment first, a window to be killed in.
type World struct {
	mu        sync.Mutex
	acted     map[string]int             // Idempotency-Key -> times it acted (at most 1)
	attempts  map[string]int             // the gate's request id -> requests
	bySession map[string]map[string]bool // session -> request ids of sessions' calls that reached the world
	keys      map[string]int             // Idempotency-Key -> requests
}

// NewWorld returns a world nothing has acted in.
func NewWorld() *World {
	return &World{acted: map[string]int{}, attempts: map[string]int{}, bySession: map[string]map[string]bool{}, keys: map[string]int{}}
}

// ServeHTTP records the request; a path ending in /publish acts.
func (s *World) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RequestID string `json:"request_id"`
		Context   struct {
			SessionID string `json:"session_id"`
			Origin    string `json:"origin"`
		} `json:"context"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	key := r.Header.Get("Idempotency-Key")
	time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond) // a window to be killed in
	s.mu.Lock()
	s.attempts[body.RequestID]++
	s.keys[key]++
	if strings.HasSuffix(r.URL.Path, "/publish") {
		s.acted[key] = 1 // once per key, however often it is asked
		if body.Context.Origin != "workflow" {
			if s.bySession[body.Context.SessionID] == nil {
				s.bySession[body.Context.SessionID] = map[string]bool{}
			}
			s.bySession[body.Context.SessionID][body.RequestID] = true // its key is derived from it, the session and the principal
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok": true, "key": %q}`, key)
}

// ActedFor returns the request ids of a session's calls that acted (not
// a workflow's).
func (s *World) ActedFor(session string) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.bySession[session])
}

// Asked returns how many keys were asked more than once (a call in
// flight at a kill, asked again under its key), and how many attempts
// (request ids) reached the world.
func (s *World) Asked() (again, attempts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.keys {
		if n > 1 {
			again++
		}
	}
	return again, len(s.attempts)
}

// CheckWorkflows fails t when a completed external task of the workflows
// did not act exactly once, or a workflow's attempt (request id) reached
// the world twice — a finished call ran again. It returns the workflows'
// statuses and how many external tasks completed.
func (s *World) CheckWorkflows(t testing.TB, ws []workflow.Workflow) (statuses map[string]int, completed int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	statuses = map[string]int{}
	for _, w := range ws {
		statuses[w.Status]++
		for _, task := range w.Tasks {
			if task.Tool == "publish" && task.Status == workflow.TaskCompleted {
				completed++
				key := gate.DownstreamKey(w.Principal, w.SessionID, task.Key) // the task's key as its service sees it
				if s.acted[key] != 1 {
					t.Fatalf("workflow %s: %s completed, the world acted %d times for %s", w.ID, task.ID, s.acted[key], task.Key)
				}
			}
		}
	}
	for id, n := range s.attempts {
		if n > 1 && strings.HasPrefix(id, "wf_") {
			t.Fatalf("attempt %s reached the world %d times: a finished call ran again", id, n)
		}
	}
	return statuses, completed
}

// UntilWorkflowsEnd lists the workflows until none is left running,
// calling between before each look; it fails t after two minutes.
func UntilWorkflowsEnd(t testing.TB, list func() ([]workflow.Workflow, error), between func()) []workflow.Workflow {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		between()
		ws, err := list()
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, w := range ws {
			if !workflow.Terminal(w.Status) {
				open++
			}
		}
		if open == 0 {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workflows have not ended", open, len(ws))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
