package killtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/workflow"
)

// TestWorkflowsSurviveKills kills serve (SQLite) with SIGKILL 200 times
// while a client starts workflows whose external tasks are HTTP tools,
// approves their layers and resumes the interrupted ones. Afterwards
// every workflow has ended, no external call acted twice, no attempt
// (request id) reached the service twice — a finished task never ran
// again — and no workflow kept more than 5 checkpoints.
func TestWorkflowsSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it 200 times")
	}
	t.Parallel() // it waits on processes of its own most of the time
	svc := servetest.NewWorld()
	down := httptest.NewServer(svc)
	defer down.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wf.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [fetch, publish]}]
tools:
  - {name: fetch, description: "Fetch a report.", impact: read, http: {url: %q}}
  - {name: publish, description: "Publish a report.", impact: external, http: {url: %q}}
`, down.URL+"/fetch", down.URL+"/publish")), 0o644)
	bin := servetest.Binary(t)
	db := filepath.Join(dir, "kill.db")
	args := []string{"--config", cfg, "--db", db, "--workflow-lease", "300ms"}
	url, cmd, _ := servetest.Serve(t, bin, args...)
	session := servetest.NewSession(t, url)
	cmd.Process.Kill()
	cmd.Wait()

	tasks := []map[string]any{
		{"id": "a", "tool": "fetch"},
		{"id": "p1", "tool": "publish", "args": map[string]any{"from": "${a.output.key}"}, "depends_on": []string{"a"}},
		{"id": "p2", "tool": "publish", "depends_on": []string{"a"}},
		{"id": "b", "tool": "fetch", "depends_on": []string{"p1", "p2"}},
		{"id": "p3", "tool": "publish", "depends_on": []string{"b"}},
		{"id": "c", "tool": "fetch", "depends_on": []string{"p3"}},
		{"id": "d", "tool": "fetch", "depends_on": []string{"c"}},
		{"id": "e", "tool": "fetch", "depends_on": []string{"d"}},
	}
	var mu sync.Mutex
	started := map[string]bool{}
	drive := func(url string, stop <-chan struct{}, start bool) { // starts workflows, answers their pauses
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if start && i%4 == 0 {
				policy := []string{"manual", "automatic"}[rand.IntN(2)]
				resp, body, err := servetest.PostJSON(url+"/v1/workflows", map[string]any{"session_id": session, "tasks": tasks, "resume_policy": policy})
				if err != nil {
					return
				}
				if resp.StatusCode == 201 {
					var c struct {
						WorkflowID string `json:"workflow_id"`
					}
					json.Unmarshal(body, &c)
					mu.Lock()
					started[c.WorkflowID] = true
					mu.Unlock()
				}
			}
			resp, err := http.Get(url + "/v1/workflows?limit=500")
			if err != nil {
				return
			}
			var list struct{ Workflows []workflow.Workflow }
			json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			for _, w := range list.Workflows {
				var cmd map[string]any
				switch {
				case w.Approval != nil:
					cmd = map[string]any{"type": "approval_response", "checkpoint_id": w.Approval.CheckpointID, "approved": true}
				case w.Interruption != nil:
					cmd = map[string]any{"type": "checkpoint_response", "checkpoint_id": w.Interruption.CheckpointID, "decision": "continue"}
				default:
					continue
				}
				if _, _, err := servetest.PostJSON(url+"/v1/workflows/"+w.ID+"/commands", cmd); err != nil {
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	r := rand.New(rand.NewPCG(3, 5))
	const kills = 200
	for range kills {
		url, cmd, _ := servetest.Serve(t, bin, args...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { drive(url, stop, true) })
		time.Sleep(time.Duration(50+r.IntN(250)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
	// a last instance, left alive, takes every workflow to its end
	url, cmd, _ = servetest.Serve(t, bin, args...)
	stop := make(chan struct{})
	go drive(url, stop, false)
	workflows := servetest.UntilWorkflowsEnd(t, func() ([]workflow.Workflow, error) {
		resp, err := http.Get(url + "/v1/workflows?limit=500")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var list struct{ Workflows []workflow.Workflow }
		err = json.NewDecoder(resp.Body).Decode(&list)
		return list.Workflows, err
	}, func() {})
	close(stop)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	mu.Lock()
	defer mu.Unlock()
	statuses, completedKeys := svc.CheckWorkflows(t, workflows)
	if len(workflows) < len(started) {
		t.Fatalf("%d workflows started, %d listed", len(started), len(workflows))
	}
	again, attempts := svc.Asked() // a call in flight at a kill, asked again under its key
	st, err := sqlite.Open(context.Background(), db, &sqlite.Options{Extensions: []store.Extension{workflow.Extension}})
	if err != nil {
		t.Fatalf("the database does not open cleanly after %d kills: %v", kills, err)
	}
	defer st.Close()
	most := 0
	st.Query(context.Background(), `SELECT COUNT(*) FROM workflow_checkpoints GROUP BY workflow_id ORDER BY 1 DESC LIMIT 1`, nil,
		func(scan func(...any) error) error { return scan(&most) })
	if most > workflow.KeepCheckpoints {
		t.Fatalf("a workflow keeps %d checkpoints", most)
	}
	recs, err := st.Records(context.Background(), session, 0)
	if err != nil || audit.Verify(recs) != nil {
		t.Fatalf("the session's chain: %v", err)
	}
	if statuses[workflow.StatusCompleted] == 0 || completedKeys == 0 {
		t.Fatalf("no workflow completed: %v", statuses)
	}
	t.Logf("%d kills: %d workflows, all ended %v; %d external calls acted once each (%d asked again under their key after a kill); %d attempts, none twice; at most %d checkpoints kept",
		kills, len(workflows), statuses, completedKeys, again, attempts, most)
}
