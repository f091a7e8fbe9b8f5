package gate_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// racing is a memory store that, once armed, lets another execution run
// at one point of a call's path: before its claim of the key, or right
// after its read of the session (the session it returns is then behind).
type racing struct {
	*memstore.Store
	at    string // "claim" or "session"
	hook  func()
	armed atomic.Bool
}

func (s *racing) Claim(ctx context.Context, c store.Claim) (store.Request, bool, error) {
	if s.at == "claim" && s.armed.CompareAndSwap(true, false) {
		s.hook()
	}
	return s.Store.Claim(ctx, c)
}

func (s *racing) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	sess, err := s.Store.Session(ctx, id)
	if s.at == "session" && s.armed.CompareAndSwap(true, false) {
		s.hook()
	}
	return sess, err
}

// TestFinishedElsewhereAnswersTheCurrentSession: a call whose key another
// execution finishes while it is on its way — before its claim, or between
// its reads of the session and of the key — answers with the result
// recorded and the session as the store holds it after that run, not the
// one it read before.
func TestFinishedElsewhereAnswersTheCurrentSession(t *testing.T) {
	for _, at := range []string{"claim", "session"} {
		t.Run(at, func(t *testing.T) {
			ctx := context.Background()
			st := &racing{Store: memstore.New(), at: at}
			send := func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"sent":true}`), nil
			}
			c := demotest.Core(t, &core.Options{Store: st, Programs: demo.SendWith(tool.Program(send))})
			if _, err := c.Open(ctx, gate.Opening{SessionID: "a", Mode: "sales"}); err != nil {
				t.Fatal(err)
			}
			inv := gate.Invocation{SessionID: "a", Tool: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`),
				Origin: gate.OriginAPI, Principal: "ann", RequestID: "r"}
			st.hook = func() {
				if _, err := c.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser}); err != nil {
					t.Error(err)
				}
				if res, err := c.Execute(ctx, inv); err != nil || res.Status != agentplane.StatusSuccess {
					t.Errorf("the other execution: %+v %v", res, err)
				}
			}
			st.armed.Store(true)
			res, err := c.Execute(ctx, inv)
			if err != nil || res.Status != agentplane.StatusSuccess {
				t.Fatalf("%+v %v", res, err)
			}
			if st.armed.Load() {
				t.Fatal("the other execution did not run")
			}
			cur, err := st.Store.Session(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if res.Session == nil {
				t.Fatal("answered without the session")
			}
			if res.Session.Version != cur.Version {
				t.Fatalf("answered with the session at version %d; the store holds %d", res.Session.Version, cur.Version)
			}
		})
	}
}
