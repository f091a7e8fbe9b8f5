package workflow

import (
	"context"
	"encoding/json"
	"fmt"
)

// Decider is an internal agent (the seed's level 2): Go code in the
// process that decides a workflow's pauses from its event stream — a rule
// engine, several agents voting, a background supervisor. Decide gets
// the event that paused the workflow (decision_required,
// approval_required or interrupted) and the workflow as it is, and
// returns the command to queue, or false to leave the pause to someone
// else (a human, an external agent).
type Decider interface {
	Decide(ctx context.Context, ev Event, w *Workflow) (Command, bool)
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(ctx context.Context, ev Event, w *Workflow) (Command, bool)

// Decide calls f.
func (f DeciderFunc) Decide(ctx context.Context, ev Event, w *Workflow) (Command, bool) {
	return f(ctx, ev, w)
}

// Follow reads a workflow's events from the start, hands each pause that
// is still current to the decider and queues the command it returns, as
// the workflow's principal, until the workflow ends (it returns it then)
// or ctx is done. A command the workflow rejects ends Follow with the
// reason.
func (e *Engine) Follow(ctx context.Context, id string, d Decider) (*Workflow, error) {
	row, err := e.j.load(ctx, id)
	if err != nil {
		return nil, err
	}
	principal := row.w.Principal
	var after int64
	wt := e.waitOn(id)
	defer wt.stop()
	for {
		ch := wt.changed()
		raws, seqs, err := e.j.events(ctx, id, after, 256)
		if err != nil {
			return nil, err
		}
		for i, raw := range raws {
			after = seqs[i]
			var ev Event
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("workflow: event %d of %s: %w", seqs[i], id, err)
			}
			switch ev.Type {
			case EventDecisionRequired, EventApprovalRequired, EventInterrupted:
				w, err := e.Get(ctx, id, principal)
				if err != nil {
					return nil, err
				}
				if w.Seq != ev.Seq || !Paused(w.Status) {
					continue // answered already
				}
				cmd, ok := d.Decide(ctx, ev, w)
				if !ok {
					continue
				}
				if _, err := e.Command(ctx, id, principal, cmd); err != nil {
					return w, err
				}
			case EventCompleted, EventAborted, EventFailed:
				return e.Get(ctx, id, principal)
			}
		}
		if len(raws) == 0 {
			if err := e.await(ctx, ch); err != nil {
				return nil, err
			}
		}
	}
}
