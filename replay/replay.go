// Package replay re-runs recorded sessions through the router and the gate
// and reports every divergence from the record: a decision, a result, a
// state diff or a session state that came out differently.
//
// The clock and request ids are taken from the record; an exchange with
// the LLM is answered with the recorded response after the request the
// LLM connection would send now is compared with the recorded one (the
// messages and the tools offered); tools other than
// the built-in ones answer with their recorded outcome (failures with
// their recorded code and message), each event is decided on the session
// version it was decided on when recorded (so a version_conflict between
// two writers replays as one), and a confirmation token presented in the
// record is matched, by its digest, to the token the replay issued in its
// place. A provider's items are served from the answer the record read
// (the sources of its decision, or of an execution's checks: versions the
// store keeps), not asked of the provider; a read the record names no
// kept answer for asks the provider and is reported (Fallback). A session replayed against the
// configuration that recorded it reproduces exactly; against a changed
// configuration, replay shows what the change would have changed.
//
//	n, err := replay.Run(ctx, c, logFile, os.Stdout, nil)
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
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// Run replays every session of a JSON Lines audit log (the export format)
// on the configurations its records name (see Options), writing one line per divergence to out, and
// returns how many there were. A provider read that asked the live
// provider (Fallback) is a line of its own, not counted. The log's chains
// are verified first; a broken log is an error.
//
// The core's tools are the tools the recording ran with (their specs
// decide the confirmation policy and argument checks); replay calls none
// of them but answers in their place with the recorded outcome.
func Run(ctx context.Context, c *core.Core, log io.Reader, out io.Writer, opts *Options) (int, error) {
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
	if len(order) == 0 {
		return 0, errors.New("replay: the log has no records")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	total := 0
	for _, id := range order {
		report := o.Fallback
		o.Fallback = func(f Fallback) {
			fmt.Fprintf(out, "session %s, record %d (%s): %s\n", id, f.Seq, f.Kind, f)
			if report != nil {
				report(f)
			}
		}
		divs, err := Session(ctx, c, sessions[id], &o)
		o.Fallback = report
		for _, d := range divs {
			fmt.Fprintf(out, "session %s, record %d (%s): %s differs\n  recorded: %s\n  replayed: %s\n", id, d.Seq, d.Kind, d.Field, d.Recorded, d.Replayed)
		}
		total += len(divs)
		if err != nil {
			return total, fmt.Errorf("replay: session %s: %w", id, err)
		}
	}
	return total, nil
}

// Divergence is one way a replayed record came out differently from the
// recorded one.
type Divergence struct {
	Seq      int64           `json:"seq"`   // the record's sequence number
	Kind     string          `json:"kind"`  // the record's kind
	Field    string          `json:"field"` // what differs: decision, result, state, llm messages, …
	Recorded json.RawMessage `json:"recorded"`
	Replayed json.RawMessage `json:"replayed"`
}

// Fallback is a provider read that replay could not serve from the
// record, so the live provider answered it: the record names no answer of
// the source (a record written before records named them, a source the
// configuration replayed on reads and the recorded one did not), or
// names one the store does not keep.
type Fallback struct {
	Seq     int64  `json:"seq"`               // the record's sequence number
	Kind    string `json:"kind"`              // the record's kind
	Source  string `json:"source"`            // "provider:ID" or "catalog:ID"
	Version string `json:"version,omitempty"` // the answer the record names; "" when it names none
	Reason  string `json:"reason"`            // why it was not served from the record
}

// String says what happened, for a report line.
func (f Fallback) String() string {
	if f.Version == "" {
		return fmt.Sprintf("%s: %s; asked the live provider", f.Source, f.Reason)
	}
	return fmt.Sprintf("%s %s: %s; asked the live provider", f.Source, f.Version, f.Reason)
}

// player replays one session. Its fields are what the injected clock, id
// generator, token generator, tools and store read: the record being
// replayed.
type player struct {
	cur     *audit.Record
	ids     []string // request ids still to hand out for the current record
	divs    []Divergence
	issued  string            // the token the replay issued for the current record
	tokens  map[string]string // digest of a recorded token -> the token the replay issued in its place
	history map[int64]*agentplane.Session
	loads   int // sessions loaded for the current record
	// answers are the providers' answers served so far, by version;
	// items finds one the store keeps; fellBack the sources of the current
	// record already reported as read live
	answers  map[string]*resolve.Index
	items    func(ctx context.Context, version string) (*resolve.Index, bool, error)
	fellBack map[string]bool
	fallback func(Fallback)
}

// Pinned serves a provider's items as the current record read them
// (resolve.Pins): the answer its sources name (the record's, for an
// execution's checks, or its decision's), from the store. A source it
// names no kept answer for is reported and read live.
func (p *player) Pinned(ctx context.Context, id agentplane.ResolverSource) (*resolve.Index, bool) {
	src := id.String()
	version := p.cur.Sources[src] // an execution's checks
	if d := p.cur.Decision; d != nil && version == "" {
		version = d.Sources[src]
	}
	if version == "" {
		p.fell(src, "", "the record names no answer of it")
		return nil, false
	}
	if ix, ok := p.answers[version]; ok {
		return ix, true
	}
	ix, ok, err := p.items(ctx, version)
	switch {
	case err != nil:
		p.fell(src, version, "reading it failed: "+err.Error())
		return nil, false
	case !ok:
		p.fell(src, version, "the store does not keep it")
		return nil, false
	}
	p.answers[version] = ix
	return ix, true
}

// Named reports whether the current record names an answer of the source
// (resolve.Pins): one it read whenever it had one at hand.
func (p *player) Named(id agentplane.ResolverSource) bool {
	src := id.String()
	if p.cur.Sources[src] != "" {
		return true
	}
	d := p.cur.Decision
	return d != nil && d.Sources[src] != ""
}

// fell reports a provider read of the current record answered live, once
// per record and source.
func (p *player) fell(src, version, reason string) {
	if p.fellBack[src] {
		return
	}
	p.fellBack[src] = true
	if p.fallback != nil {
		p.fallback(Fallback{Seq: p.cur.Seq, Kind: p.cur.Kind, Source: src, Version: version, Reason: reason})
	}
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

func (p *player) newToken() string {
	p.issued = fmt.Sprintf("replay-token-%d", p.cur.Seq)
	return p.issued
}

// call answers a tool call with the recorded outcome.
func (p *player) call(context.Context, json.RawMessage) (json.RawMessage, error) {
	res := p.cur.Result
	switch {
	case res == nil:
		return nil, errors.New("replay: no recorded result for this call")
	case res.Status == agentplane.StatusSuccess:
		return res.Output, nil
	case res.Error != nil:
		return nil, &gate.Recorded{Code: res.Error.Code, Detail: res.Error.Detail}
	}
	return nil, errors.New("replay: the recorded call did not succeed")
}

func (p *player) diverge(field string, recorded, replayed any) {
	a, _ := json.Marshal(recorded)
	b, _ := json.Marshal(replayed)
	p.divs = append(p.divs, Divergence{Seq: p.cur.Seq, Kind: p.cur.Kind, Field: field, Recorded: a, Replayed: b})
}

// compare reports a divergence when the two values' canonical JSON
// differs.
func (p *player) compare(field string, recorded, replayed any) {
	a, _ := json.Marshal(recorded)
	b, _ := json.Marshal(replayed)
	ca, errA := canonjson.Append(nil, a, nil)
	cb, errB := canonjson.Append(nil, b, nil)
	if errA != nil || errB != nil || !bytes.Equal(ca, cb) {
		p.diverge(field, json.RawMessage(ca), json.RawMessage(cb))
	}
}

// compareRecord compares the record replayed with the recorded one: what
// was decided, what resulted, the state after.
func (p *player) compareRecord(got []audit.Record) {
	r := p.cur
	if len(got) != 1 {
		p.diverge("record", r.Kind, fmt.Sprintf("%d records", len(got)))
		return
	}
	g := &got[0]
	p.compare("kind", r.Kind, g.Kind)
	p.compare("decision", r.Decision, g.Decision)
	p.compare("result", r.Result, g.Result)
	p.compare("state", r.State, g.State)
	p.compare("notes", r.Notes, g.Notes)
	if len(r.Sources) > 0 { // records from before executions named their reads have none
		p.compare("sources", r.Sources, g.Sources)
	}
}

// sessions is the replay's store: a memory store whose Session returns the
// session as it was at the version the current record was decided on, so
// an event decided on a state another writer had moved on from is decided
// on that state again.
type sessions struct {
	*memstore.Store
	p *player
}

func (s sessions) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	s.p.loads++
	if r := s.p.cur.Rebased; r > 0 && s.p.loads > 1 {
		// the gate reloads the session when it moved on while the tool
		// ran: it meets the state the recorded run met
		if old, ok := s.p.history[r]; ok {
			return old.Clone(), nil
		}
	}
	if b := s.p.cur.Base; b > 0 {
		if old, ok := s.p.history[b]; ok {
			return old.Clone(), nil
		}
	}
	return s.Store.Session(ctx, id)
}

// Options configure a replay. nil means defaults.
type Options struct {
	// Fixed replays every record on the core's configuration (replay
	// --config): what a changed configuration would have changed.
	// Otherwise each record is replayed on the configuration it names
	// (its config member) when Configs finds it, so a session that ran
	// across a reload replays without divergence, and on the core's
	// configuration when it does not.
	Fixed bool
	// Configs finds the configuration a record names by its digest; nil
	// means the core's store (core.StoredConfig).
	Configs func(ctx context.Context, digest string) (*config.Config, bool, error)
	// Items finds a provider's answer a record names by its version
	// (Decision.Sources, Record.Sources); nil means the core's store
	// (core.StoredItems). Replay serves it instead of asking the provider.
	Items func(ctx context.Context, version string) (*resolve.Index, bool, error)
	// Fallback, when set, is told of every provider read replay answered
	// live because the record names no kept answer for it; Run writes
	// each as a line.
	Fallback func(Fallback)
}

// engine is what replays the records of one configuration: a core derived
// over the replay's store and the LLM connection that builds requests.
type engine struct {
	rc    *core.Core
	agent *llm.Agent
}

// engines are a session replay's engines, by configuration digest ("" for
// the core's own), each built once.
type engines struct {
	c      *core.Core
	opts   Options
	p      *player
	st     sessions
	by     map[string]*engine
	builts []*core.Core // cores rebuilt over stored configurations, closed at the end
}

// of returns the engine of the configuration a record names.
func (e *engines) of(ctx context.Context, digest string) (*engine, error) {
	base := e.c
	key := ""
	if !e.opts.Fixed && digest != "" && digest != e.c.Digest() {
		if en, ok := e.by[digest]; ok {
			return en, nil
		}
		cfg, ok, err := e.opts.Configs(ctx, digest)
		if err != nil {
			return nil, fmt.Errorf("configuration %s: %w", config.ShortDigest(digest), err)
		}
		if ok {
			if base, err = e.c.Rebuild(ctx, cfg); err != nil {
				return nil, fmt.Errorf("configuration %s: %w", config.ShortDigest(digest), err)
			}
			e.builts = append(e.builts, base)
			key = digest
		}
	}
	if en, ok := e.by[key]; ok {
		if key != digest && digest != "" {
			e.by[digest] = en // not kept: the core's, from now on
		}
		return en, nil
	}
	p := e.p
	stand := tool.NewRegistry() // the same tools, answering from the record
	for _, t := range base.View().Tools() {
		if err := stand.Register(&tool.Func{S: t.Spec, Fn: p.call}); err != nil {
			return nil, err
		}
	}
	rc, err := base.Derive(core.Derived{Store: e.st, Now: p.now, NewID: p.newID, NewToken: p.newToken, Tools: stand})
	if err != nil {
		return nil, err
	}
	var limits config.LLM
	if l := base.Config().LLM; l != nil {
		limits = *l
	}
	// builds requests only: the answers are the recorded ones, and the
	// awareness lines (from the ledger, outside the chain) the recorded ones
	agent := llm.New(rc, nil, limits, &llm.Options{Awareness: func(context.Context, *agentplane.Session) []string {
		if p.cur.LLM != nil {
			return p.cur.LLM.Aware
		}
		return nil
	}})
	en := &engine{rc: rc, agent: agent}
	e.by[key] = en
	if digest != "" {
		e.by[digest] = en
	}
	return en, nil
}

// close closes the cores rebuilt over stored configurations.
func (e *engines) close() {
	for _, b := range e.builts {
		b.Close()
	}
}

// Session replays one session's records, whose chain the caller has
// verified, each on the configuration it names when opts allow (see
// Options), and returns its divergences (with an error, those found before
// the replay could not go on).
func Session(ctx context.Context, c *core.Core, recs []audit.Record, opts *Options) ([]Divergence, error) {
	if len(recs) == 0 || recs[0].Kind != audit.KindOpen || recs[0].State == nil {
		return nil, errors.New("the log does not start with the session's open record")
	}
	p := &player{cur: &recs[0], tokens: map[string]string{}, history: map[int64]*agentplane.Session{},
		answers: map[string]*resolve.Index{}, fellBack: map[string]bool{}}
	st := sessions{Store: memstore.New(), p: p}
	e := &engines{c: c, p: p, st: st, by: map[string]*engine{}}
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.Configs == nil {
		e.opts.Configs = c.StoredConfig
	}
	p.items, p.fallback = e.opts.Items, e.opts.Fallback
	if p.items == nil {
		p.items = c.StoredItems
	}
	ctx = resolve.WithPins(ctx, p) // providers answer as the records read them
	defer e.close()
	en, err := e.of(ctx, recs[0].Config)
	if err != nil {
		return nil, err
	}
	first := recs[0].State
	s, err := en.rc.Open(ctx, gate.Opening{SessionID: first.ID, Mode: first.Mode, Principal: recs[0].Principal, Owner: first.Owner, UI: first.UI})
	if err != nil {
		return nil, err
	}
	p.compare("state", first, s)
	p.history[s.Version] = s
	for i := 1; i < len(recs); i++ {
		r := &recs[i]
		p.cur, p.ids, p.issued, p.loads = r, nil, "", 0
		clear(p.fellBack)
		if r.Intent != nil && r.Intent.RequestID != "" {
			p.ids = []string{r.Intent.RequestID}
		}
		en, err := e.of(ctx, r.Config)
		if err != nil {
			return p.divs, err
		}
		rc, agent := en.rc, en.agent
		switch r.Kind {
		case audit.KindTurn:
			if r.Input == nil {
				return p.divs, fmt.Errorf("record %d: a turn without input", r.Seq)
			}
			if _, err := rc.Turn(ctx, core.TurnRequest{SessionID: r.Session, Principal: r.Principal, Input: *r.Input}); err != nil {
				p.diverge("turn", r.Decision, err.Error())
			}
		case audit.KindExecution:
			if r.Intent == nil {
				return p.divs, fmt.Errorf("record %d: an execution without intent", r.Seq)
			}
			in := *r.Intent
			if r.Presented != "" {
				in.ConfirmationToken = p.tokens[r.Presented]
				if in.ConfirmationToken == "" {
					in.ConfirmationToken = "replay-unknown-token" // issued outside this log: unknown here too
				}
			}
			if _, err := rc.Intent(ctx, gate.IntentRequest{SessionID: r.Session, Principal: r.Principal, Roles: r.Roles, Intent: in, Approval: r.Approval}); err != nil {
				return p.divs, err
			}
		case audit.KindResume:
			if _, _, err := rc.Resume(ctx, r.Session, r.Principal); err != nil {
				return p.divs, err
			}
		case audit.KindLLM:
			// the request the LLM connection would send now, against the
			// recorded one; then the recorded answer, as the model's
			if r.LLM == nil {
				return p.divs, fmt.Errorf("record %d: an llm record without its exchange", r.Seq)
			}
			sess, err := st.Session(ctx, r.Session)
			if err != nil {
				return p.divs, err
			}
			req, offered, err := agent.Request(ctx, sess, r.Roles)
			if err != nil {
				return p.divs, err
			}
			p.compare("llm tools offered", r.LLM.Tools, offered)
			if r.LLM.Digest != "" {
				// a compact record: its system prompt, the history built
				// again, and what followed it must digest as recorded
				sent := req.Messages
				if len(r.LLM.Messages) > 1 {
					sent = append(append([]agentplane.LLMMessage(nil), sent...), r.LLM.Messages[1:]...)
				}
				if len(r.LLM.Messages) > 0 && len(req.Messages) > 0 {
					p.compare("llm system prompt", r.LLM.Messages[0], req.Messages[0])
				}
				if r.LLM.HistoryMessages > 0 {
					p.compare("llm history length", r.LLM.HistoryMessages, req.History)
				}
				if d := llm.Digest(sent); d != r.LLM.Digest {
					p.diverge("llm messages (digest)", r.LLM.Digest, d)
				}
			} else { // a record that kept every message
				recorded := r.LLM.Messages
				if r.LLM.Internal && len(recorded) >= len(req.Messages) {
					recorded = recorded[:len(req.Messages)] // the conversation; the internal turn's own follows
				}
				p.compare("llm messages", recorded, req.Messages)
			}
			if _, err := rc.RecordExchange(ctx, r.Session, r.Principal, r.Roles, r.LLM); err != nil {
				return p.divs, err
			}
		case audit.KindNotice:
			if r.Notice == nil {
				return p.divs, fmt.Errorf("record %d: a notice without its notification", r.Seq)
			}
			if _, err := rc.RecordNotice(ctx, r.Session, r.Notice); err != nil {
				return p.divs, err
			}
		case audit.KindProposal:
			if r.Intent == nil || r.Decision == nil {
				return p.divs, fmt.Errorf("record %d: a proposal without its call or question", r.Seq)
			}
			sess, err := st.Session(ctx, r.Session)
			if err != nil {
				return p.divs, err
			}
			if _, err := rc.Propose(ctx, core.Proposal{Base: sess, Principal: r.Principal, Tool: r.Intent.Action, Args: r.Intent.Args, Question: r.Decision.QuestionText}); err != nil {
				p.diverge("proposal", r.Decision, err.Error())
			}
		default:
			return p.divs, fmt.Errorf("record %d: unexpected kind %q", r.Seq, r.Kind)
		}
		got, err := st.Records(ctx, r.Session, int64(i))
		if err != nil {
			return p.divs, err
		}
		p.compareRecord(got)
		if r.Issued != "" && p.issued != "" {
			p.tokens[r.Issued] = p.issued
		}
		cur, err := st.Store.Session(ctx, r.Session)
		if err != nil {
			return p.divs, err
		}
		p.history[cur.Version] = cur
	}
	return p.divs, nil
}
