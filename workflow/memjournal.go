package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// memJournal keeps workflows in memory, with the SQL journal's rules:
// writes checked against the lease, the last KeepCheckpoints checkpoints,
// an ordered command queue. It keeps copies (Workflow.copy), and encodes
// events when they are read.
type memJournal struct {
	mu        sync.Mutex
	workflows map[string]*memWorkflow
}

type memWorkflow struct {
	w          *Workflow
	principal  string
	status     string
	created    time.Time
	owner      string
	lease      int64
	leaseUntil int64
	events     []Event // events[i] has seq i+1
	cps        []memCheckpoint
	commands   []memCommand // commands[i] has seq i+1
}

// memCheckpoint is a checkpoint with the workflow's copy.
type memCheckpoint struct {
	Checkpoint
	w *Workflow
}

type memCommand struct {
	body   Command // with its pause (DecisionID) and key (RequestID)
	digest string
	status string
	reason string
	code   string
}

func newMemJournal() *memJournal { return &memJournal{workflows: map[string]*memWorkflow{}} }

func (j *memJournal) op(*saved) store.Op { return nil }

func (j *memJournal) save(_ context.Context, s *saved) error {
	w := s.w.copy()
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[s.w.ID]
	switch {
	case s.insert:
		m = &memWorkflow{principal: s.w.Principal, created: s.w.Created, owner: s.owner, lease: s.lease, leaseUntil: s.until}
		j.workflows[s.w.ID] = m
	case m == nil || m.lease != s.lease:
		return errStale
	}
	if s.add == nil && s.cmd != nil && (s.cmd.Seq < 1 || s.cmd.Seq > int64(len(m.commands)) || m.commands[s.cmd.Seq-1].status != CommandQueued) {
		return agentplane.Errorf(agentplane.CodeInvalidState, "workflow: command %d of %s was processed already", s.cmd.Seq, s.w.ID)
	}
	if s.add != nil && slices.ContainsFunc(m.commands, func(c memCommand) bool { return c.status == CommandQueued }) {
		return errQueued
	}
	if err := m.unique(s); err != nil {
		return err
	}
	m.w, m.status = w, w.Status
	m.events = append(m.events, s.events...)
	if s.cp != nil {
		m.cps = append(m.cps, memCheckpoint{*s.cp, s.cp.w.copy()})
		if len(m.cps) > KeepCheckpoints {
			m.cps = slices.Delete(m.cps, 0, len(m.cps)-KeepCheckpoints)
		}
	}
	switch {
	case s.add != nil:
		m.commands = append(m.commands, memCommand{body: *s.add, digest: s.digest, status: s.cmd.Status, reason: s.cmd.Reason, code: s.cmd.Code})
		s.cmd.Seq = int64(len(m.commands))
	case s.cmd != nil:
		c := &m.commands[s.cmd.Seq-1]
		c.status, c.reason, c.code = s.cmd.Status, s.cmd.Reason, s.cmd.Code
	}
	return nil
}

// unique holds the SQL tables' unique indexes: one applied answer per
// pause, one command per key.
func (m *memWorkflow) unique(s *saved) error {
	var pause, key string
	switch {
	case s.add != nil:
		pause, key = s.add.DecisionID, s.add.RequestID
	case s.cmd != nil:
		pause = m.commands[s.cmd.Seq-1].body.DecisionID
	default:
		return nil
	}
	for i, c := range m.commands {
		switch {
		case int64(i+1) == s.cmd.Seq && s.add == nil:
		case key != "" && c.body.RequestID == key:
			return fmt.Errorf("workflow %s: command %d has the key already", s.w.ID, i+1)
		case pause != "" && s.cmd.Status == CommandApplied && c.status == CommandApplied && c.body.DecisionID == pause:
			return fmt.Errorf("workflow %s: command %d answered %s already", s.w.ID, i+1, pause)
		}
	}
	return nil
}

func (j *memJournal) reject(_ context.Context, id string, lease int64, o outcome, _ time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil || m.lease != lease || o.Seq < 1 || o.Seq > int64(len(m.commands)) || m.commands[o.Seq-1].status != CommandQueued {
		return errStale
	}
	c := &m.commands[o.Seq-1]
	c.status, c.reason, c.code = CommandRejected, o.Reason, o.Code
	return nil
}

func (j *memJournal) row(m *memWorkflow) (row, error) {
	return row{w: m.w.copy(), lease: m.lease, leaseUntil: m.leaseUntil}, nil
}

func (j *memJournal) load(_ context.Context, id string) (row, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil {
		return row{}, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
	}
	return j.row(m)
}

func (j *memJournal) status(_ context.Context, id string) (head, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil {
		return head{}, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
	}
	return head{principal: m.principal, status: m.status, pause: m.w.pause(), seq: m.w.Seq}, nil
}

// cas changes a workflow's lease when it still holds the one expected.
func (j *memJournal) cas(id string, lease int64, change func(m *memWorkflow)) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil || m.lease != lease {
		return false
	}
	change(m)
	return true
}

func (j *memJournal) claim(_ context.Context, id, owner string, lease int64, until time.Time) (bool, error) {
	return j.cas(id, lease, func(m *memWorkflow) { m.owner, m.lease, m.leaseUntil = owner, lease+1, until.UnixNano() }), nil
}

func (j *memJournal) renew(_ context.Context, id string, lease int64, until time.Time) (bool, error) {
	return j.cas(id, lease, func(m *memWorkflow) { m.leaseUntil = until.UnixNano() }), nil
}

func (j *memJournal) release(_ context.Context, id string, lease int64) error {
	j.cas(id, lease, func(m *memWorkflow) { m.leaseUntil = 0 })
	return nil
}

func (j *memJournal) claimable(_ context.Context, now time.Time, limit int) ([]row, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []row
	for _, m := range j.workflows {
		if len(out) == limit {
			break
		}
		if !Terminal(m.status) && m.leaseUntil < now.UnixNano() {
			r, err := j.row(m)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (j *memJournal) enqueue(_ context.Context, id, principal string, cmd Command, digest string, _ time.Time) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	switch {
	case m == nil || m.principal != principal:
		return 0, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
	case Terminal(m.status):
		return 0, agentplane.Errorf(agentplane.CodeInvalidState, "workflow %s is %s: it takes no more commands", id, m.status)
	}
	if cmd.RequestID != "" && slices.ContainsFunc(m.commands, func(c memCommand) bool { return c.body.RequestID == cmd.RequestID }) {
		return 0, fmt.Errorf("workflow %s: a command has the key already", id)
	}
	m.commands = append(m.commands, memCommand{body: cmd, digest: digest, status: CommandQueued})
	return int64(len(m.commands)), nil
}

func (j *memJournal) nextCommand(_ context.Context, id string) (int64, Command, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m := j.workflows[id]; m != nil {
		for i, c := range m.commands {
			if c.status == CommandQueued {
				return int64(i + 1), c.body, true, nil
			}
		}
	}
	return 0, Command{}, false, nil
}

func (j *memJournal) outcome(_ context.Context, id string, seq int64) (outcome, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil || seq < 1 || seq > int64(len(m.commands)) {
		return outcome{}, agentplane.Errorf(agentplane.CodeNotFound, "workflow %s has no command %d", id, seq)
	}
	c := m.commands[seq-1]
	return outcome{Seq: seq, Status: c.status, Reason: c.reason, Code: c.code}, nil
}

func (j *memJournal) byRequest(_ context.Context, id, principal, key string) (int64, string, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m := j.workflows[id]; m != nil && m.principal == principal {
		for i, c := range m.commands {
			if c.body.RequestID == key {
				return int64(i + 1), c.digest, true, nil
			}
		}
	}
	return 0, "", false, nil
}

func (j *memJournal) answeredBy(_ context.Context, id, pause string) (int64, string, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m := j.workflows[id]; m != nil {
		for i, c := range m.commands {
			if c.status == CommandApplied && c.body.DecisionID == pause {
				return int64(i + 1), c.body.Type, true, nil
			}
		}
	}
	return 0, "", false, nil
}

func (j *memJournal) heads(_ context.Context, ids []string) (map[string]int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]int64{}
	for _, id := range ids {
		if m := j.workflows[id]; m != nil && len(m.events) > 0 {
			out[id] = m.events[len(m.events)-1].Seq
		}
	}
	return out, nil
}

func (j *memJournal) events(_ context.Context, id string, after int64, limit int) ([]json.RawMessage, []int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil || after >= int64(len(m.events)) {
		return nil, nil, nil
	}
	evs := m.events[max(after, 0):min(int64(len(m.events)), max(after, 0)+int64(limit))]
	out := make([]json.RawMessage, len(evs))
	seqs := make([]int64, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, nil, err
		}
		out[i], seqs[i] = b, ev.Seq
	}
	return out, seqs, nil
}

func (j *memJournal) checkpoints(_ context.Context, id string) ([]Checkpoint, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	if m == nil {
		return nil, nil
	}
	out := make([]Checkpoint, len(m.cps))
	for i, cp := range m.cps {
		out[i] = cp.Checkpoint
	}
	return out, nil
}

func (j *memJournal) restore(_ context.Context, id, checkpointID string) (*Workflow, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m := j.workflows[id]; m != nil {
		for _, cp := range m.cps {
			if cp.ID == checkpointID {
				return cp.w.copy(), nil
			}
		}
	}
	return nil, agentplane.Errorf(agentplane.CodeNotFound, "checkpoint %q is no longer kept", checkpointID)
}

func (j *memJournal) list(_ context.Context, principal string, limit int) ([]*Workflow, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var all []*memWorkflow
	for _, m := range j.workflows {
		if m.principal == principal {
			all = append(all, m)
		}
	}
	slices.SortFunc(all, func(a, b *memWorkflow) int { return b.created.Compare(a.created) })
	var out []*Workflow
	for _, m := range all[:min(len(all), limit)] {
		out = append(out, m.w.copy())
	}
	return out, nil
}
