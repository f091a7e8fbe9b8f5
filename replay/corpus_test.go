package replay_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/scenario"
)

var updateCorpus = flag.Bool("update", false, "record the corpus of testdata/corpus again from the example conversations")

// TestCorpus replays the sessions of testdata/corpus — recorded by an
// earlier build from the conversations of examples/*.yaml, on a SQLite
// store, with the send tool succeeding, failing, timing out and down in
// turn — against today's code and the embedded demo: a recording replays
// without a divergence, or the change that made it diverge is one the
// diff of `go test ./replay -run TestCorpus -update` shows and a person
// accepts. The generated-session property test covers what today's code
// records; this covers what earlier builds recorded.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example conversations: %v", err)
	}
	if *updateCorpus {
		for _, file := range files {
			recordConversation(t, file)
		}
	}
	logs, err := filepath.Glob("testdata/corpus/*.jsonl")
	if err != nil || len(logs) != len(files) {
		t.Fatalf("%d recordings for %d conversations (go test ./replay -run TestCorpus -update records them): %v", len(logs), len(files), err)
	}
	c := demotest.Core(t, nil)
	for _, path := range logs {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".jsonl"), func(t *testing.T) {
			n, out, err := replayFile(t, c, path)
			if err != nil || n != 0 {
				t.Fatalf("%s: %d divergences, %v\n%s", path, n, err, out)
			}
		})
	}
}

// recordConversation plays a conversation file's turns (what the person
// typed, selected, confirmed or declined) on the demo runtime over SQLite
// and exports the session to testdata/corpus.
func recordConversation(t *testing.T, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := scenario.Parse(file, data)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	clock := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	rt := demotest.Runtime(t, plane.Options{DB: filepath.Join(t.TempDir(), "corpus.db"), Core: core.Options{Programs: sendTool(&calls), ToolTimeout: 20 * time.Millisecond,
		Now: func() time.Time { clock = clock.Add(7 * time.Second); return clock }}})
	c := rt.Core
	ctx := context.Background()
	principal := f.Principal
	if principal == "" {
		principal = "ann"
	}
	s, err := c.Start(ctx, core.Start{Principal: principal, Mode: f.Mode})
	if err != nil {
		t.Fatal(err)
	}
	for i, turn := range f.Turns {
		in := agentplane.TurnInput{UI: f.UI}
		if turn.UI != nil {
			in.UI = *turn.UI
		}
		switch {
		case turn.User != nil:
			in.Text = *turn.User
		case turn.Select != nil:
			in.Selection = &agentplane.Selection{CommandID: turn.Select.Command, ID: turn.Select.ID}
		case turn.Confirm:
			in.Text = "yes"
		case turn.Decline:
			in.Text = "no"
		default:
			continue
		}
		if _, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: principal, Input: in, RequestID: fmt.Sprint("turn-", i+1)}); err != nil {
			t.Fatalf("%s turn %d: %v", file, i+1, err)
		}
	}
	path := filepath.Join("testdata/corpus", strings.TrimSuffix(filepath.Base(file), ".yaml")+".jsonl")
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) { // recorded again, not appended to
		t.Fatal(err)
	}
	export(t, c, s.ID, path)
}
