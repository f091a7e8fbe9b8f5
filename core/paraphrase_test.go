package core_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/internal/testkit/opsdesk"
	"github.com/agentplane/agentplane/tool"
)

// TestParaphraseIsAskedThenRunOnce: an executable recognised by similarity
// alone is asked about (one question, even for a command that confirms
// anyway), runs nothing until "yes", and then runs once through the gate
// without a second question — once for eight clients answering yes at
// once.
func TestParaphraseIsAskedThenRunOnce(t *testing.T) {
	raw, err := opsdesk.Config()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	programs := map[string]tool.Program{}
	for _, name := range opsdesk.Programs() {
		programs[name] = func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, name+string(args))
			return json.RawMessage(`{"ok":true}`), nil
		}
	}
	c, err := core.New(context.Background(), core.Source{YAML: raw, Name: "opsdesk.yaml"}, &core.Options{Programs: programs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := startSession(t, c, opsdesk.Ops)
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "could you give search indexer a bounce for me"})
	if d := tr.Decision; d.Action != agentplane.ActionAskQuestion || d.CommandID != "restart_service" || d.ResolvedID != "SER-4" || tr.ConfirmationToken == "" {
		t.Fatalf("paraphrase -> %s %s(%s) token %q\n%v", d.Action, d.CommandID, d.ResolvedID, tr.ConfirmationToken, d.Trace)
	}
	if len(ran) != 0 {
		t.Fatalf("ran before yes: %v", ran)
	}
	// eight clients answer yes at once: it runs once
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 8 {
		wg.Go(func() {
			tr, err := c.Turn(context.Background(), core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "yes"}})
			if err != nil {
				return // lost the race for the session's version: nothing ran for it
			}
			if tr.Result != nil && tr.Result.Status == agentplane.StatusSuccess {
				ok.Add(1)
				if tr.Session.PendingConfirmation != nil {
					t.Errorf("a second question is pending: %+v", tr.Session.PendingConfirmation)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if ok.Load() != 1 || len(ran) != 1 || ran[0] != `restart_service{"id":"SER-4"}` {
		t.Fatalf("%d successful yeses, ran %v; want restart_service(SER-4) once", ok.Load(), ran)
	}
}
