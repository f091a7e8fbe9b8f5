package workflow_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/workflow"
)

// A session a workflow ran in replays exactly: its calls (origin
// workflow) with the approval they ran under, which stands for the
// confirmation in the replay too.
func TestWorkflowSessionReplays(t *testing.T) {
	e := newEnv(t, nil)
	w := e.start(t, threeLayers, "")
	w = e.command(t, w, workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()})
	if w.Status != workflow.StatusCompleted {
		t.Fatalf("%+v", w)
	}
	path := filepath.Join(t.TempDir(), "log.jsonl")
	f, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Export(context.Background(), e.session, func(ctx context.Context, after int64) ([]audit.Record, error) {
		return e.core.Records(ctx, e.session, after)
	}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	log, _ := os.ReadFile(path)
	if !bytes.Contains(log, []byte(`"approval":"`+w.ID+`-a`)) {
		t.Fatal("no approval in the log")
	}
	var out bytes.Buffer
	n, err := replay.Run(context.Background(), e.core, bytes.NewReader(log), &out, nil)
	if err != nil || n != 0 {
		t.Fatalf("%d divergences, %v:\n%s", n, err, out.String())
	}
}
