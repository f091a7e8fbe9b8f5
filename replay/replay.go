// Package replay re-runs recorded sessions through the router and the gate
// and reports every divergence from the record: a decision, a result, a
// state diff or a session state that came out differently.
//
// The clock, request ids and confirmation tokens are taken from the record,
// and tools other than the built-in ones answer with their recorded output,
// so a session replayed against the configuration that recorded it
// reproduces exactly; against a changed configuration, replay shows what the
// change would have changed.
//
//	n, err := replay.Run(ctx, reg, logFile, os.Stdout)
//	// n == 0: the configuration reproduces every recorded session
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/conversation"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// Run replays every session of a JSON Lines audit log (the export format)
// against the registry, writing one line per divergence to out, and returns
// how many there were. The log's chains are verified first; a broken log is
// an error.
//
// tools are the tools the recording ran with (their specs decide the
// confirmation policy and argument checks); replay calls none of them but
// answers in their place with the recorded outcome.
func Run(ctx context.Context, reg *router.Registry, tools *tool.Registry, log io.Reader, out io.Writer) (int, error) {
	data, err := io.ReadAll(log)
	if err != nil {
		return 0, err
	}
	if _, err := audit.VerifyJSONL(bytes.NewReader(data)); err != nil {
		return 0, fmt.Errorf("replay: the log is not intact: %w", err)
	}
	var order []string
	sessions := map[string][]audit.Record{}
	err = audit.ReadJSONL(bytes.NewReader(data), func(_ int, r *audit.Record) error {
		if _, seen := sessions[r.Session]; !seen {
			order = append(order, r.Session)
		}
		sessions[r.Session] = append(sessions[r.Session], *r)
		return nil
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, id := range order {
		n, err := session(ctx, reg, tools, sessions[id], out)
		if err != nil {
			return total, fmt.Errorf("replay: session %s: %w", id, err)
		}
		total += n
	}
	return total, nil
}

// player replays one session. Its fields are what the injected clock, id
// generator, token generator and tools read: the record being replayed.
type player struct {
	cur   *audit.Record
	ids   []string // request ids still to hand out for the current record
	out   io.Writer
	count int
}

func (p *player) now() time.Time { return p.cur.Time }

func (p *player) newID() string {
	if len(p.ids) > 0 {
		id := p.ids[0]
		p.ids = p.ids[1:]
		return id
	}
	return fmt.Sprintf("replay-%d", p.cur.Seq)
}

// newToken returns the confirmation token the record shows was issued.
func (p *player) newToken() string {
	r := p.cur
	switch {
	case r.Result != nil && r.Result.ConfirmationToken != "":
		return r.Result.ConfirmationToken
	case r.State != nil && r.State.PendingConfirmation != nil && r.State.PendingConfirmation.Token != "":
		return r.State.PendingConfirmation.Token
	}
	return fmt.Sprintf("replay-token-%d", r.Seq)
}

// call answers a tool call with the recorded outcome.
func (p *player) call(context.Context, json.RawMessage) (json.RawMessage, error) {
	res := p.cur.Result
	switch {
	case res == nil:
		return nil, errors.New("replay: no recorded result for this call")
	case res.Status == agentplane.StatusSuccess:
		return res.Output, nil
	case res.Error != nil && res.Error.Code == agentplane.CodeToolUnavailable:
		return nil, tool.ErrUnavailable
	case res.Error != nil:
		return nil, errors.New(res.Error.Detail)
	}
	return nil, errors.New("replay: the recorded call did not succeed")
}

func (p *player) diverge(field string, recorded, replayed any) {
	p.count++
	a, _ := json.Marshal(recorded)
	b, _ := json.Marshal(replayed)
	fmt.Fprintf(p.out, "session %s, record %d (%s): %s differs\n  recorded: %s\n  replayed: %s\n", p.cur.Session, p.cur.Seq, p.cur.Kind, field, a, b)
}

func (p *player) compare(field string, recorded, replayed any) {
	a, _ := json.Marshal(recorded)
	b, _ := json.Marshal(replayed)
	if !bytes.Equal(a, b) {
		p.diverge(field, recorded, replayed)
	}
}

func session(ctx context.Context, reg *router.Registry, tools *tool.Registry, recs []audit.Record, out io.Writer) (int, error) {
	if len(recs) == 0 || recs[0].Kind != audit.KindOpen || recs[0].State == nil {
		return 0, errors.New("the log does not start with the session's open record")
	}
	p := &player{cur: &recs[0], out: out}
	stand := tool.NewRegistry() // the same tools, answering from the record
	if tools != nil {
		for _, name := range tools.Names() {
			t, _ := tools.Get(name)
			if err := stand.Register(&tool.Func{S: t.Spec(), Fn: p.call}); err != nil {
				return 0, err
			}
		}
	}
	store := memstore.New()
	g, err := gate.New(reg, store, &gate.Options{Now: p.now, NewToken: p.newToken, Tools: stand})
	if err != nil {
		return 0, err
	}
	e := conversation.New(reg, g, store, &conversation.Options{Now: p.now, NewID: p.newID})
	first := recs[0].State
	s, err := g.Open(ctx, first.ID, first.Mode)
	if err != nil {
		return 0, err
	}
	p.compare("state", first, s)
	for i := 1; i < len(recs); i++ {
		r := &recs[i]
		p.cur = r
		p.ids = nil
		if r.Intent != nil && r.Intent.RequestID != "" {
			p.ids = []string{r.Intent.RequestID}
		}
		switch r.Kind {
		case audit.KindTurn:
			if r.Input == nil {
				return p.count, fmt.Errorf("record %d: a turn without input", r.Seq)
			}
			t, err := e.Turn(ctx, r.Session, *r.Input)
			if err != nil {
				p.diverge("turn", r.Decision, err.Error())
				continue
			}
			p.compare("decision", r.Decision, t.Decision)
			p.compare("result", r.Result, t.Result)
			p.compare("state", r.State, t.Session)
		case audit.KindExecution:
			if r.Intent == nil {
				return p.count, fmt.Errorf("record %d: an execution without intent", r.Seq)
			}
			res, err := g.Intent(ctx, r.Session, r.Roles, *r.Intent)
			if err != nil {
				return p.count, err
			}
			p.compare("result", r.Result, &res)
			p.compare("state", r.State, res.Session)
		default:
			return p.count, fmt.Errorf("record %d: unexpected kind %q", r.Seq, r.Kind)
		}
	}
	return p.count, nil
}
