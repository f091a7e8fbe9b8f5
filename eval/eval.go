// Package eval measures how a configuration routes labelled utterances:
// per-command precision and recall, the pairs of commands it confuses,
// how often it keeps from the LLM an utterance that must not act, each
// miss with the router's trace, what no line covers, and advice for the
// one global example threshold with every utterance it would decide
// otherwise. It is the tool for the people who write configurations, and
// a line says what they configure: who speaks (principal, roles), in which
// mode, with what active, what the person picks from a picker
// (selection), and the decisions that would all be right (any_of).
//
//	cases, err := eval.Read(f)
//	rep, err := eval.Run(ctx, c, cases, nil)
//	fmt.Println(rep.Accuracy)
package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/router"
)

// Case is one labelled utterance: a line of the file.
type Case struct {
	Text string `json:"text,omitempty"`
	// Selection is a pick from a picker or an option button. With Text,
	// the text is routed first and must offer a pick (a picker, or a
	// question listing options); the pick is then made there, as the page
	// makes it, and Expect is what the pick decides. Without Text, the
	// turn is the selection (its command_id is needed).
	Selection *Selection `json:"selection,omitempty"`
	Mode      string     `json:"mode,omitempty"` // the default mode when empty
	UI        bool       `json:"ui,omitempty"`
	// Principal is who speaks: the session is theirs, and per-person
	// providers are asked as them. "" means the run's principal.
	Principal string `json:"principal,omitempty"`
	// Roles are the principal's roles (they decide which toolboxes are
	// active); absent means the run's roles, [] none.
	Roles []string `json:"roles,omitempty"`
	// Active is the item active in the session, if any.
	Active *Active `json:"active,omitempty"`
	Expect Expect  `json:"expect"`
	Line   int     `json:"-"`
}

// Selection is a pick: the item's id and the command it is for ("" with
// text: the command of the picker the text opened).
type Selection struct {
	CommandID string `json:"command_id,omitempty"`
	ID        string `json:"id"`
}

// Active is an item active in a case's session.
type Active struct {
	EntityType  string `json:"entity_type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Expect is the decision a case should get: Action, with CommandID,
// ResolvedID and TargetMode checked when given (an expected
// continue_with_llm is an utterance that must not act) — or AnyOf, the
// decisions that would each be right. A launcher's picker names its
// on_select command; a line that expects the launcher is credited with it.
type Expect struct {
	Action     agentplane.Action `json:"action,omitempty"`
	CommandID  string            `json:"command_id,omitempty"`
	ResolvedID string            `json:"resolved_id,omitempty"`
	TargetMode string            `json:"target_mode,omitempty"`
	AnyOf      []Expect          `json:"any_of,omitempty"`
}

// Alternatives returns the decisions that would each be right: AnyOf, or
// the expectation itself.
func (e Expect) Alternatives() []Expect {
	if len(e.AnyOf) > 0 {
		return e.AnyOf
	}
	return []Expect{e}
}

// MustNotAct reports whether every right decision is continue_with_llm.
func (e Expect) MustNotAct() bool {
	for _, a := range e.Alternatives() {
		if a.Action != agentplane.ActionContinueLLM {
			return false
		}
	}
	return true
}

// check reports the first problem of an expectation at path.
func (e Expect) check(path string, nested bool) error {
	if len(e.AnyOf) > 0 {
		if nested {
			return fmt.Errorf("%s.any_of: alternatives cannot have alternatives", path)
		}
		if e.Action != "" || e.CommandID != "" || e.ResolvedID != "" || e.TargetMode != "" {
			return fmt.Errorf("%s: give either any_of or action (with command_id, resolved_id, target_mode), not both", path)
		}
		for i, a := range e.AnyOf {
			if err := a.check(fmt.Sprintf("%s.any_of[%d]", path, i), true); err != nil {
				return err
			}
		}
		return nil
	}
	if e.AnyOf != nil {
		return fmt.Errorf("%s.any_of: empty; list the decisions that would each be right", path)
	}
	switch e.Action {
	case agentplane.ActionInvokeCommand, agentplane.ActionOpenPicker, agentplane.ActionAskQuestion, agentplane.ActionContinueLLM:
	case "":
		return fmt.Errorf("%s.action is missing", path)
	default:
		return fmt.Errorf("%s.action %q is not a decision (invoke_command, open_picker, ask_clarifying_question, continue_with_llm)", path, e.Action)
	}
	if e.Action != agentplane.ActionContinueLLM && e.CommandID == "" {
		return fmt.Errorf("%s.command_id is missing for %s", path, e.Action)
	}
	if e.Action == agentplane.ActionContinueLLM && (e.CommandID != "" || e.ResolvedID != "" || e.TargetMode != "") {
		return fmt.Errorf("%s: continue_with_llm names no command, item or mode", path)
	}
	return nil
}

// Read decodes a JSON Lines file of cases; blank lines and lines starting
// with # are skipped. An error names the line and what is wrong with it.
func Read(r io.Reader) ([]Case, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), agentplane.MaxInputBytes+4096)
	var out []Case
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var c Case
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("line %d: more than one JSON value", n)
		}
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		c.Line = n
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cases")
	}
	return out, nil
}

// check reports the first problem of a case.
func (c *Case) check() error {
	switch s := c.Selection; {
	case c.Text == "" && s == nil:
		return fmt.Errorf("text is missing (or a selection)")
	case s != nil && s.ID == "":
		return fmt.Errorf("selection.id is missing")
	case s != nil && c.Text == "" && s.CommandID == "":
		return fmt.Errorf("selection.command_id is missing: a selection without text names its command")
	}
	for i, r := range c.Roles {
		if strings.TrimSpace(r) == "" {
			return fmt.Errorf("roles[%d] is empty", i)
		}
	}
	if c.Active != nil && (c.Active.EntityType == "" || c.Active.ID == "") {
		return fmt.Errorf("active needs entity_type and id")
	}
	return c.Expect.check("expect", false)
}

// Options adjust Run. nil means defaults.
type Options struct {
	// Principal is who speaks on lines that name nobody; "" means
	// agentplane.LocalPrincipal.
	Principal string
	// Roles are the roles of lines that give none.
	Roles []string
	// Now is the turns' time; zero means the core's clock.
	Now time.Time
	// NoAdvice skips the threshold advice (it rebuilds the router for the
	// thresholds it tries).
	NoAdvice bool
}

// CommandScore is how well one command was recognised.
type CommandScore struct {
	CommandID           string
	Expected, Predicted int // cases expecting it; decisions credited to it
	Correct             int // both
	Precision, Recall   float64
}

// Confusion is a pair of commands one was taken for the other, and how
// often ("" is continue_with_llm).
type Confusion struct {
	Expected, Got string
	Count         int
}

// Miss is a case that got another decision.
type Miss struct {
	Case     Case
	Decision agentplane.Decision
	// Note says what went wrong beside the decision: a text that offered
	// nothing to pick from, a line the router refused.
	Note string
}

// Report is what Run measured.
type Report struct {
	Cases, Correct int
	Accuracy       float64
	// MustNotAct counts the cases expecting continue_with_llm, and
	// Hijacked those of them that got any other decision.
	MustNotAct, Hijacked int
	Commands             []CommandScore // by command id
	Confusions           []Confusion    // most frequent first
	Misses               []Miss         // in file order
	// Untested are the commands no line expects, and UntestedModes the
	// modes no line is routed in: what the file does not cover.
	Untested, UntestedModes []string
	// Advice is the example threshold that serves the file best (nil
	// with Options.NoAdvice).
	Advice *Advice
}

// HijackRate is the share of must-not-act cases that were not handed to
// the LLM.
func (r Report) HijackRate() float64 {
	if r.MustNotAct == 0 {
		return 0
	}
	return float64(r.Hijacked) / float64(r.MustNotAct)
}

// runner routes cases on one router.
type runner struct {
	c     *core.Core
	rt    *router.Router
	opts  *Options
	now   time.Time
	modes map[string]bool // the modes lines were routed in
}

// Run routes every case (routing is pure: nothing runs, nothing is
// recorded) and measures. A case the router refuses (malformed text, an
// unknown mode, a selection of an item its source does not hold) is a
// miss with a continue_with_llm decision carrying the error in its trace.
// The error is for threshold advice that could not rebuild the router.
func Run(ctx context.Context, c *core.Core, cases []Case, opts *Options) (Report, error) {
	if opts == nil {
		opts = &Options{}
	}
	now := opts.Now
	if now.IsZero() {
		now = c.Now()
	}
	r := &runner{c: c, rt: c.Router(), opts: opts, now: now, modes: map[string]bool{}}
	rep := Report{Cases: len(cases)}
	scores := map[string]*CommandScore{}
	score := func(id string) *CommandScore {
		if scores[id] == nil {
			scores[id] = &CommandScore{CommandID: id}
		}
		return scores[id]
	}
	confusions := map[[2]string]int{}
	expected := map[string]bool{}
	decisions := r.routeAll(ctx, cases)
	for i, cs := range cases {
		d, note := decisions[i].d, decisions[i].note
		ok, want, got := r.judge(cs, decisions[i])
		for _, a := range cs.Expect.Alternatives() {
			expected[a.CommandID] = true
		}
		if cs.Expect.MustNotAct() {
			rep.MustNotAct++
			if d.Action != agentplane.ActionContinueLLM {
				rep.Hijacked++
			}
		}
		if want != "" {
			score(want).Expected++
		}
		if got != "" {
			score(got).Predicted++
		}
		if ok {
			rep.Correct++
			if want != "" {
				score(want).Correct++
			}
			continue
		}
		if got == want && want != "" {
			score(want).Correct++ // the right command, another action or item
		} else {
			confusions[[2]string{want, got}]++
		}
		rep.Misses = append(rep.Misses, Miss{Case: cs, Decision: d, Note: note})
	}
	rep.Accuracy = float64(rep.Correct) / float64(max(rep.Cases, 1))
	for _, s := range scores {
		if s.Predicted > 0 {
			s.Precision = float64(s.Correct) / float64(s.Predicted)
		}
		if s.Expected > 0 {
			s.Recall = float64(s.Correct) / float64(s.Expected)
		}
		rep.Commands = append(rep.Commands, *s)
	}
	slices.SortFunc(rep.Commands, func(a, b CommandScore) int { return strings.Compare(a.CommandID, b.CommandID) })
	for k, n := range confusions {
		rep.Confusions = append(rep.Confusions, Confusion{Expected: k[0], Got: k[1], Count: n})
	}
	slices.SortFunc(rep.Confusions, func(a, b Confusion) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Expected+"\x00"+a.Got, b.Expected+"\x00"+b.Got)
	})
	for _, cmd := range c.View().Registry().Commands() {
		if !expected[cmd.ID] {
			rep.Untested = append(rep.Untested, cmd.ID)
		}
	}
	for _, m := range c.Config().Modes {
		if !r.modes[m.Key] {
			rep.UntestedModes = append(rep.UntestedModes, m.Key)
		}
	}
	if !opts.NoAdvice {
		adv, err := advise(ctx, r, cases, decisions)
		if err != nil {
			return rep, err
		}
		rep.Advice = adv
	}
	return rep, nil
}

// routed is a case's decision, and a note on what went wrong beside it.
type routed struct {
	d    agentplane.Decision
	note string
}

func (r *runner) routeAll(ctx context.Context, cases []Case) []routed {
	out := make([]routed, len(cases))
	for i, cs := range cases {
		d, note, err := r.route(ctx, cs)
		if err != nil {
			d = agentplane.Decision{Action: agentplane.ActionContinueLLM, Trace: append(d.Trace, "refused: "+err.Error())}
			note = "refused: " + err.Error()
		}
		out[i] = routed{d, note}
	}
	return out
}

// principal and roles of a case.
func (r *runner) who(cs Case) (string, []string) {
	p, roles := cs.Principal, cs.Roles
	if p == "" {
		p = r.opts.Principal
	}
	if p == "" {
		p = agentplane.LocalPrincipal
	}
	if roles == nil {
		roles = r.opts.Roles
	}
	return p, roles
}

// route decides a case: its text, its selection, or its text and then
// the selection in the picker the text opened.
func (r *runner) route(ctx context.Context, cs Case) (agentplane.Decision, string, error) {
	reg := r.c.View().Registry()
	mode := cs.Mode
	if mode == "" {
		mode = reg.DefaultMode()
	} else if reg.ModeOf(mode) != mode {
		return agentplane.Decision{}, "", fmt.Errorf("mode %q is not configured", mode)
	}
	r.modes[mode] = true
	principal, roles := r.who(cs)
	sess := &agentplane.Session{ID: "eval", Mode: mode, Version: 1, Owner: principal}
	if cs.Active != nil {
		sess.AWC = agentplane.ActiveWorkContext{EntityType: cs.Active.EntityType,
			Entity: &agentplane.EntityHeader{ID: cs.Active.ID, DisplayName: cs.Active.DisplayName}}
	}
	in := agentplane.TurnInput{Text: cs.Text, UI: cs.UI, Roles: roles, Now: r.now}
	sel := cs.Selection
	if cs.Text == "" {
		in.Selection = &agentplane.Selection{CommandID: sel.CommandID, ID: sel.ID}
		d, err := r.rt.Route(ctx, sess, in)
		return d, "", err
	}
	d, err := r.rt.Route(ctx, sess, in)
	if err != nil || sel == nil {
		return d, "", err
	}
	// the pick, made in what the text offered, as the page makes it
	offers := d.Action == agentplane.ActionOpenPicker || d.Action == agentplane.ActionAskQuestion && len(d.OptionIDs) > 0
	if !offers {
		return d, fmt.Sprintf("the text offers nothing to select %s from: %s %s", sel.ID, d.Action, d.CommandID), nil
	}
	if len(d.OptionIDs) > 0 && !slices.Contains(d.OptionIDs, sel.ID) {
		return d, fmt.Sprintf("the question does not offer %s (options %s)", sel.ID, strings.Join(d.OptionIDs, ", ")), nil
	}
	cmd := sel.CommandID
	if cmd == "" {
		cmd = d.CommandID
	}
	after := *sess
	after.Version++
	after.PendingPicker, after.PendingConfirmation = r.c.Pending(sess, &d, r.now)
	picked, err := r.rt.Route(ctx, &after, agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: cmd, ID: sel.ID}, UI: cs.UI, Roles: roles, Now: r.now})
	if err != nil {
		return d, "", fmt.Errorf("selecting %s in the %s %s offered: %w", sel.ID, d.Action, d.CommandID, err)
	}
	picked.Trace = append(append(slices.Clip(d.Trace), "then the selection of "+sel.ID+":"), picked.Trace...)
	return picked, "", nil
}

// judge says whether the decision is one the case expects (a line with a
// note — a pick that could not be made — never is), which command the
// case is scored under (the alternative that matched, or the first; ""
// for continue_with_llm) and which the decision is credited to.
func (r *runner) judge(cs Case, rd routed) (ok bool, want, got string) {
	d := rd.d
	alts := cs.Expect.Alternatives()
	at := 0
	for i, a := range alts {
		if rd.note == "" && r.matches(cs, a, d) {
			ok, at = true, i
			break
		}
	}
	if alts[at].Action != agentplane.ActionContinueLLM {
		want = alts[at].CommandID
	}
	return ok, want, r.credit(cs, d, want)
}

func (r *runner) matches(cs Case, a Expect, d agentplane.Decision) bool {
	if d.Action != a.Action {
		return false
	}
	if a.Action == agentplane.ActionContinueLLM {
		return true
	}
	return r.credit(cs, d, a.CommandID) == a.CommandID &&
		(a.ResolvedID == "" || d.ResolvedID == a.ResolvedID) &&
		(a.TargetMode == "" || d.TargetMode == a.TargetMode)
}

// credit returns the command a decision is credited to ("" for
// continue_with_llm): its command, or the launcher want when the decision
// is that launcher's picker or question — its on_select command, in its
// target mode.
func (r *runner) credit(cs Case, d agentplane.Decision, want string) string {
	if d.Action == agentplane.ActionContinueLLM {
		return ""
	}
	if want == "" || want == d.CommandID {
		return d.CommandID
	}
	reg := r.c.View().Registry()
	l, ok := reg.Command(want)
	offers := d.Action == agentplane.ActionOpenPicker || d.Action == agentplane.ActionAskQuestion && len(d.OptionIDs) > 0
	mode := reg.ModeOf(cs.Mode)
	_, roles := r.who(cs)
	if !ok || l.Kind != agentplane.KindLauncher || l.OnSelect != d.CommandID || !offers || !reg.CommandActive(mode, roles, l.ID) {
		return d.CommandID
	}
	target := ""
	if l.TargetMode != "" && l.TargetMode != mode {
		target = l.TargetMode
	}
	if d.TargetMode != target {
		return d.CommandID
	}
	return want
}
