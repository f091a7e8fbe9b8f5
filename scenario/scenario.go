// Package scenario runs conversation test files: scripted turns against a
// configuration, with expectations on each turn's decision, result and the
// session afterwards. Users test their configuration the way they test code.
//
//	name: switch mode
//	mode: general
//	principal: ann          # who speaks (default: the run's, "test")
//	roles: [lead]           # their roles (default: the run's)
//	turns:
//	  - user: switch to DDR mode
//	    expect: {decision: invoke_command, command: set_mode, resolved_id: ddr, status: success, mode: ddr}
//
// A turn is one of `user: TEXT`, `select: {command: ID, id: ID}`,
// `confirm: true` (the human says yes) or `decline: true` (no); `roles:` on
// a turn replaces the file's for it. A turn the router hands to the LLM may
// script the model's replies, one per round (`llm: [{text: ..., tool_calls:
// [{name: ..., args: {...}}]}]`), and expect what the LLM turn did
// (`expect: {llm: {text, calls, question, prompt, offered, not_offered}}`):
// the calls run through the gate as a model's would.
//
// `stubs:` replaces what the configuration reaches outside for, for this
// file: a tool by a fixed answer (`{tool: NAME, output: VALUE}`) or a
// failure (`{tool: NAME, error: MESSAGE}`), a catalog by items (`{catalog:
// ID, items: [{id, display_name, ...}]}`), so a file runs without the
// service behind them. Every run uses ids of its own (sessions, requests,
// confirmation tokens), so a service that answers an idempotency key once
// never takes a second run for the first.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// File is a conversation test file.
type File struct {
	Name string `yaml:"name"`
	Mode string `yaml:"mode"` // the mode the session starts in; the default mode when empty
	UI   bool   `yaml:"ui"`   // the client renders pickers
	// Principal is who speaks: the session is theirs, tools are told it,
	// per-person providers answer it. "" means the run's.
	Principal string `yaml:"principal"`
	// Roles are the principal's roles; absent means the run's, [] none.
	Roles []string `yaml:"roles"`
	Stubs []Stub   `yaml:"stubs"`
	Turns []Turn   `yaml:"turns"`
}

// Stub replaces, for one file, a tool (Tool, with Output or Error) or a
// catalog's items (Catalog, with Items).
type Stub struct {
	Tool   string `yaml:"tool"`
	Output any    `yaml:"output"` // what the tool returns, as JSON; {} when neither this nor Error is given
	Error  string `yaml:"error"`  // the tool fails with this message
	// Catalog is a catalog whose items are Items for this file, instead
	// of its configured items or its provider's.
	Catalog string             `yaml:"catalog"`
	Items   []resolve.WireItem `yaml:"items"`
	Line    int                `yaml:"-"`
}

// Turn is one scripted turn and what must follow from it.
type Turn struct {
	User    *string    `yaml:"user"`
	Select  *Selection `yaml:"select"`
	Confirm bool       `yaml:"confirm"`
	Decline bool       `yaml:"decline"`
	UI      *bool      `yaml:"ui"`    // overrides the file's ui for this turn
	Roles   []string   `yaml:"roles"` // overrides the file's roles for this turn
	LLM     []Reply    `yaml:"llm"`
	Expect  Expect     `yaml:"expect"`
	Line    int        `yaml:"-"`
}

// Reply is a scripted reply of the LLM: text and/or tool calls.
type Reply struct {
	Text      string     `yaml:"text"`
	ToolCalls []ToolCall `yaml:"tool_calls"`
}

// ToolCall is a scripted tool call.
type ToolCall struct {
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args"`
}

// ExpectLLM lists what must hold of a turn's LLM turn.
type ExpectLLM struct {
	Text       string   `yaml:"text"`        // a part of the model's text
	Calls      []string `yaml:"calls"`       // each call's status, or status:error_code, in order
	Question   string   `yaml:"question"`    // a part of the question put to the human
	Failure    string   `yaml:"failure"`     // a part of why the LLM gave no answer
	Prompt     []string `yaml:"prompt"`      // parts of the system prompt of the turn's first request
	Offered    []string `yaml:"offered"`     // tools that must be offered
	NotOffered []string `yaml:"not_offered"` // tools that must not be
}

// Selection is a pick from a picker or an option button.
type Selection struct {
	Command string `yaml:"command"`
	ID      string `yaml:"id"`
}

// Expect lists what must hold after a turn; empty fields are not checked.
type Expect struct {
	Decision   string     `yaml:"decision"` // open_picker | invoke_command | ask_clarifying_question | continue_with_llm
	Command    string     `yaml:"command"`
	ResolvedID string     `yaml:"resolved_id"`
	Catalog    string     `yaml:"catalog"`     // an open_picker's catalog
	Highlight  string     `yaml:"highlight"`   // an open_picker's highlighted id
	TargetMode string     `yaml:"target_mode"` // the launcher's target mode the command runs in
	Question   string     `yaml:"question"`
	Options    []string   `yaml:"options"`
	Reason     string     `yaml:"reason"` // a continue_with_llm's reason code
	Status     string     `yaml:"status"` // success | rejected | failed | confirmation_required; "none" when nothing ran
	Error      string     `yaml:"error"`  // the result's error code
	Mode       string     `yaml:"mode"`
	AWC        *AWC       `yaml:"awc"`
	Pending    string     `yaml:"pending"` // none | picker | confirmation
	LLM        *ExpectLLM `yaml:"llm"`
}

// AWC is the expected active work context; entity_id "" with the key
// present means nothing is active.
type AWC struct {
	EntityType string   `yaml:"entity_type"`
	EntityID   *string  `yaml:"entity_id"`
	Domain     string   `yaml:"domain"`
	Related    []string `yaml:"related"` // ids of the related entities, in order
}

// Failure is one unmet expectation, with where it is written.
type Failure struct {
	File string
	Line int
	Msg  string
}

func (f Failure) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Msg) }

// Tools builds the tools that replace, in a file's conversation, the
// tools of the same name of the configuration it runs on (v: the core
// given to Run, or one rebuilt with the file's catalogs), on the test's
// clock; each file gets its own, so files do not share state. The other
// tools are the core's, and run through its gate as ever.
type Tools func(v core.View, now func() time.Time) ([]tool.Tool, error)

// Options adjust Run. nil means defaults.
type Options struct {
	// Tools builds the tools that replace the core's in each file; nil
	// means none.
	Tools Tools
	// Principal speaks in files that name nobody; "" means "test".
	Principal string
	// Roles are the roles of files that give none.
	Roles []string
	// RunID prefixes the ids of the run (sessions, requests, tokens); ""
	// means a random one. Give every run its own: services dedup calls by
	// the keys made from them.
	RunID string
}

// DefaultPrincipal is who speaks when neither the file nor the run names
// anyone.
const DefaultPrincipal = "test"

// Result is what running a file found, and what it reached.
type Result struct {
	Failures  []Failure
	Principal string // who spoke
	// Decided are the commands the router's decisions named (a launcher
	// when its picker opened), sorted.
	Decided []string
	// Calls counts, by tool, the calls that ran it (succeeded or failed;
	// from the session's audit log) — the stub for a stubbed tool, the
	// real one otherwise.
	Calls map[string]int
	// Stubbed are the tools and catalogs the file replaced ("tool NAME",
	// "catalog ID"), in file order.
	Stubbed []string
}

// Parse reads a conversation test file: one YAML document with known keys,
// turns each exactly one of user, select, confirm, decline, stubs each a
// tool (with output or error) or a catalog (with valid items). Each error
// names the file and, where it can, the line.
func Parse(path string, data []byte) (*File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the file is empty; a test file has a name and turns", path)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document; a test file is one document", path, extra.Line)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Turns) == 0 {
		return nil, fmt.Errorf("%s: no turns: a test file needs at least one", path)
	}
	turnLines, stubLines := lines(&root, "turns"), lines(&root, "stubs")
	for i := range f.Turns {
		t := &f.Turns[i]
		if i < len(turnLines) {
			t.Line = turnLines[i]
		}
		kinds := 0
		for _, set := range []bool{t.User != nil, t.Select != nil, t.Confirm, t.Decline} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return nil, fmt.Errorf("%s:%d: turn %d: give exactly one of user, select, confirm, decline", path, t.Line, i+1)
		}
		if err := checkRoles(t.Roles); err != nil {
			return nil, fmt.Errorf("%s:%d: turn %d: %v", path, t.Line, i+1, err)
		}
	}
	if err := checkRoles(f.Roles); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for i := range f.Stubs {
		st := &f.Stubs[i]
		if i < len(stubLines) {
			st.Line = stubLines[i]
		}
		if err := st.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: stubs[%d]: %v", path, st.Line, i, err)
		}
		for j := range i {
			if o := f.Stubs[j]; o.Tool != "" && o.Tool == st.Tool || o.Catalog != "" && o.Catalog == st.Catalog {
				return nil, fmt.Errorf("%s:%d: stubs[%d]: %s%s is stubbed twice (stubs[%d])", path, st.Line, i, st.Tool, st.Catalog, j)
			}
		}
	}
	return &f, nil
}

func checkRoles(roles []string) error {
	for i, r := range roles {
		if strings.TrimSpace(r) == "" {
			return fmt.Errorf("roles[%d] is empty", i)
		}
	}
	return nil
}

// check reports the first problem of a stub on its own.
func (s *Stub) check() error {
	switch {
	case s.Tool == "" && s.Catalog == "":
		return errors.New("give tool (with output or error) or catalog (with items)")
	case s.Tool != "" && s.Catalog != "":
		return errors.New("give tool or catalog, not both")
	case s.Tool != "" && s.Items != nil:
		return errors.New("a tool stub has output or error, not items")
	case s.Tool != "" && s.Output != nil && s.Error != "":
		return errors.New("give output or error, not both")
	case s.Catalog != "" && (s.Output != nil || s.Error != ""):
		return errors.New("a catalog stub has items, not output or error")
	}
	if s.Tool != "" {
		if _, err := json.Marshal(s.Output); err != nil {
			return fmt.Errorf("output is not JSON: %v", err)
		}
	}
	seen := map[string]bool{}
	for j := range s.Items {
		if err := s.Items[j].Check(); err != nil {
			return fmt.Errorf("items[%d]: %v", j, err)
		}
		if seen[s.Items[j].ID] {
			return fmt.Errorf("items[%d]: id %q is given twice", j, s.Items[j].ID)
		}
		seen[s.Items[j].ID] = true
	}
	return nil
}

// Run runs the conversation test file at path against the core's
// configuration, in a session of its own (an in-memory store, a scripted
// clock, ids of its own) and returns its failures (none when it passes)
// and what it reached. The error is for a file that cannot be read or
// parsed (see Parse), or stubs that name no tool or catalog of the
// configuration.
func Run(ctx context.Context, c *core.Core, path string, opts *Options) (Result, error) {
	if opts == nil {
		opts = &Options{}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	f, err := Parse(path, data)
	if err != nil {
		return Result{}, err
	}
	principal, roles := f.Principal, f.Roles
	if principal == "" {
		principal = opts.Principal
	}
	if principal == "" {
		principal = DefaultPrincipal
	}
	if roles == nil {
		roles = opts.Roles
	}
	res := Result{Principal: principal, Calls: map[string]int{}}
	base, err := withCatalogs(ctx, c, f, path)
	if err != nil {
		return Result{}, err
	}
	if base != c {
		defer base.Close()
	}

	clock := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	run := opts.RunID
	if run == "" {
		run = runID()
	}
	n := 0
	newID := func() string { n++; return fmt.Sprintf("%s-%d", run, n) }
	v := base.View()
	var replace []tool.Tool
	if opts.Tools != nil {
		if replace, err = opts.Tools(v, now); err != nil {
			return Result{}, err
		}
	}
	replace, err = withStubs(v, replace, f, path, &res)
	if err != nil {
		return Result{}, err
	}
	fc, err := base.Derive(core.Derived{Store: memstore.New(), Now: now, NewID: newID, NewToken: newID, Replace: replace})
	if err != nil {
		return Result{}, err
	}
	defer fc.Close()
	sess, err := fc.Start(ctx, core.Start{Mode: f.Mode, Principal: principal})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	r := &runner{path: path, turns: f.Turns}
	decided := map[string]bool{}
	for i, t := range f.Turns {
		in := agentplane.TurnInput{UI: f.UI, Roles: roles}
		if t.UI != nil {
			in.UI = *t.UI
		}
		if t.Roles != nil {
			in.Roles = t.Roles
		}
		switch {
		case t.User != nil:
			in.Text = *t.User
		case t.Select != nil:
			in.Selection = &agentplane.Selection{CommandID: t.Select.Command, ID: t.Select.ID}
		case t.Confirm:
			in.Text = "yes"
		case t.Decline:
			in.Text = "no"
		}
		turn, err := fc.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: principal, Input: in})
		if err != nil {
			r.fail(i, "turn %d: %v", i+1, err)
			continue
		}
		for _, id := range decidedBy(fc, sess.Mode, in.Roles, turn.Decision) {
			decided[id] = true
		}
		if t.LLM != nil || t.Expect.LLM != nil {
			if turn.Session, err = r.llmTurn(ctx, i, fc, sess.ID, principal, in.Roles, &t, &turn); err != nil {
				return Result{}, err
			}
		}
		sess = turn.Session
		r.check(i, &t.Expect, &turn)
	}
	for id := range decided {
		res.Decided = append(res.Decided, id)
	}
	slices.Sort(res.Decided)
	res.Failures = r.failures
	recs, err := fc.Records(ctx, sess.ID, 0)
	if err != nil {
		return Result{}, err
	}
	for _, rec := range recs {
		if x := rec.Result; x != nil && x.Tool != "" && (x.Status == agentplane.StatusSuccess || x.Status == agentplane.StatusFailed) {
			res.Calls[x.Tool]++
		}
	}
	return res, nil
}

// decidedBy returns the commands a decision, made in mode, counts for: the
// command it names, and a launcher whose picker it is (its on_select
// command's picker or question, in its target mode, where it is active).
func decidedBy(c *core.Core, mode string, roles []string, d agentplane.Decision) []string {
	if d.CommandID == "" {
		return nil
	}
	out := []string{d.CommandID}
	if d.Action != agentplane.ActionOpenPicker && (d.Action != agentplane.ActionAskQuestion || len(d.OptionIDs) == 0) {
		return out
	}
	reg := c.View().Registry()
	for _, l := range reg.Commands() {
		if l.Kind != agentplane.KindLauncher || l.OnSelect != d.CommandID || !reg.CommandActive(mode, roles, l.ID) {
			continue
		}
		target := ""
		if l.TargetMode != "" && l.TargetMode != mode {
			target = l.TargetMode
		}
		if d.TargetMode == target {
			out = append(out, l.ID)
		}
	}
	return out
}

// runID is a random prefix for a run's ids.
func runID() string {
	return "t" + agentplane.RandomID()[:12]
}

// withCatalogs returns the core the file runs on: c, or, when the file
// gives catalogs' items, c rebuilt with them (the caller closes it).
func withCatalogs(ctx context.Context, c *core.Core, f *File, path string) (*core.Core, error) {
	var stubs []Stub
	for _, s := range f.Stubs {
		if s.Catalog != "" {
			stubs = append(stubs, s)
		}
	}
	if len(stubs) == 0 {
		return c, nil
	}
	cfg := *c.Config()
	cfg.Catalogs = slices.Clone(cfg.Catalogs)
	for _, s := range stubs {
		i := slices.IndexFunc(cfg.Catalogs, func(cat agentplane.Catalog) bool { return cat.ID == s.Catalog })
		if i < 0 {
			var ids []string
			for _, cat := range cfg.Catalogs {
				ids = append(ids, cat.ID)
			}
			return nil, fmt.Errorf("%s:%d: stubs: unknown catalog %q (catalogs: %s)", path, s.Line, s.Catalog, strings.Join(ids, ", "))
		}
		cat := cfg.Catalogs[i]
		cat.Provider, cat.TTL, cat.Items = nil, 0, nil
		for _, w := range s.Items {
			cat.Items = append(cat.Items, w.Item())
		}
		cfg.Catalogs[i] = cat
	}
	n, err := c.Rebuild(ctx, &cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: stubs: %w", path, err)
	}
	return n, nil
}

// withStubs returns the tools that replace the core's in a file: those
// given, and the file's stubs in place of the tools they name (the
// stubs are what the result lists as stubbed).
func withStubs(v core.View, given []tool.Tool, f *File, path string, res *Result) ([]tool.Tool, error) {
	out := map[string]tool.Tool{}
	for _, t := range given {
		out[t.Spec().Name] = t
	}
	for _, s := range f.Stubs {
		switch {
		case s.Tool != "":
			info, ok := v.Tool(s.Tool)
			if !ok {
				var names []string
				for _, t := range v.Tools() {
					names = append(names, t.Spec.Name)
				}
				return nil, fmt.Errorf("%s:%d: stubs: unknown tool %q (tools: %s)", path, s.Line, s.Tool, strings.Join(names, ", "))
			}
			out[s.Tool] = stubbed(info.Spec, s)
			res.Stubbed = append(res.Stubbed, "tool "+s.Tool)
		case s.Catalog != "":
			res.Stubbed = append(res.Stubbed, "catalog "+s.Catalog)
		}
	}
	list := make([]tool.Tool, 0, len(out))
	for _, name := range slices.Sorted(maps.Keys(out)) {
		list = append(list, out[name])
	}
	return list, nil
}

// stubbed is a tool with the real one's spec that answers as the stub
// says.
func stubbed(spec tool.Spec, s Stub) tool.Tool {
	out := json.RawMessage(`{}`)
	if s.Output != nil {
		out, _ = json.Marshal(s.Output) // checked by Parse
	}
	return &tool.Func{S: spec, Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if s.Error != "" {
			return nil, &tool.Error{Code: "stub", Message: s.Error}
		}
		return out, nil
	}}
}

// llmTurn runs the turn's scripted LLM turn, when the router handed the
// turn to the LLM, checks what it did, and returns the session after it.
func (r *runner) llmTurn(ctx context.Context, i int, c *core.Core, session, principal string, roles []string, t *Turn, tr *core.Turn) (*agentplane.Session, error) {
	if tr.Decision.Action != agentplane.ActionContinueLLM {
		if t.LLM != nil {
			r.fail(i, "turn %d: the LLM is scripted, but the router decided %s", i+1, tr.Decision.Action)
		}
		return tr.Session, nil
	}
	script := &llm.Script{}
	for _, rep := range t.LLM {
		res := agentplane.LLMResponse{Text: rep.Text}
		for k, call := range rep.ToolCalls {
			args, err := json.Marshal(call.Args)
			if err != nil || call.Args == nil {
				args = []byte("{}")
			}
			res.ToolCalls = append(res.ToolCalls, agentplane.LLMToolCall{ID: fmt.Sprintf("call_%d", k), Name: call.Name, Arguments: string(args)})
		}
		script.Replies = append(script.Replies, res)
	}
	var limits config.LLM
	if l := c.Config().LLM; l != nil {
		limits = *l
	}
	reply, err := llm.New(c, script, limits, nil).Turn(ctx, llm.TurnRequest{SessionID: session, Principal: principal, Roles: roles})
	if err != nil {
		return nil, err
	}
	if x := t.Expect.LLM; x != nil {
		r.contains(i, "the LLM's text", reply.Text, x.Text)
		r.contains(i, "the question to the human", reply.Question, x.Question)
		r.contains(i, "the LLM's failure", reply.Failure, x.Failure)
		if x.Calls != nil {
			var got []string
			for _, c := range reply.Calls {
				s := string(c.Status)
				if c.Error != nil && c.Status != agentplane.StatusConfirmationRequired {
					s += ":" + c.Error.Code
				}
				got = append(got, s)
			}
			if !slices.Equal(got, x.Calls) {
				r.fail(i, "turn %d: the LLM's calls were %q, want %q", i+1, got, x.Calls)
			}
		}
		if len(script.Requests) > 0 {
			first := script.Requests[0]
			for _, p := range x.Prompt {
				r.contains(i, "the system prompt", first.Messages[0].Content, p)
			}
			var offered []string
			for _, tl := range first.Tools {
				offered = append(offered, tl["function"].(map[string]any)["name"].(string))
			}
			for _, name := range x.Offered {
				if !slices.Contains(offered, name) {
					r.fail(i, "turn %d: tool %s is not offered to the LLM (offered: %s)", i+1, name, strings.Join(offered, ", "))
				}
			}
			for _, name := range x.NotOffered {
				if slices.Contains(offered, name) {
					r.fail(i, "turn %d: tool %s is offered to the LLM", i+1, name)
				}
			}
		}
	}
	if len(script.Replies) > 0 {
		r.fail(i, "turn %d: %d scripted LLM replies were not used", i+1, len(script.Replies))
	}
	return c.Session(ctx, session)
}

// contains fails unless got contains want (when want is set).
func (r *runner) contains(i int, what, got, want string) {
	if want != "" && !strings.Contains(got, want) {
		r.fail(i, "turn %d: %s is %q, which does not contain %q", i+1, what, got, want)
	}
}

// lines returns the line of each element of the root mapping's key.
func lines(root *yaml.Node, key string) []int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			var out []int
			for _, t := range n.Content[i+1].Content {
				out = append(out, t.Line)
			}
			return out
		}
	}
	return nil
}

type runner struct {
	path     string
	turns    []Turn
	failures []Failure
}

func (r *runner) line(i int) int {
	if i < len(r.turns) {
		return r.turns[i].Line
	}
	return 0
}

func (r *runner) fail(i int, format string, args ...any) {
	r.failures = append(r.failures, Failure{File: r.path, Line: r.line(i), Msg: fmt.Sprintf(format, args...)})
}

func (r *runner) eq(i int, what, want, got string) {
	if want != "" && want != got {
		r.fail(i, "turn %d: %s is %q, want %q", i+1, what, got, want)
	}
}

func (r *runner) check(i int, x *Expect, t *core.Turn) {
	d := t.Decision
	r.eq(i, "decision", x.Decision, string(d.Action))
	r.eq(i, "command", x.Command, d.CommandID)
	r.eq(i, "resolved id", x.ResolvedID, d.ResolvedID)
	r.eq(i, "picker catalog", x.Catalog, d.CatalogID)
	r.eq(i, "highlighted id", x.Highlight, d.HighlightID)
	r.eq(i, "target mode", x.TargetMode, d.TargetMode)
	r.eq(i, "question", x.Question, d.QuestionText)
	r.eq(i, "reason", x.Reason, d.ReasonCode)
	if x.Options != nil && !slices.Equal(x.Options, d.Options) {
		r.fail(i, "turn %d: options are %q, want %q", i+1, d.Options, x.Options)
	}
	status, code := "none", ""
	if t.Result != nil {
		status = string(t.Result.Status)
		if t.Result.Error != nil {
			code = t.Result.Error.Code
		}
	}
	r.eq(i, "status", x.Status, status)
	r.eq(i, "error code", x.Error, code)
	s := t.Session
	r.eq(i, "mode", x.Mode, s.Mode)
	pending := "none"
	switch {
	case s.PendingConfirmation != nil:
		pending = "confirmation"
	case s.PendingPicker != nil:
		pending = "picker"
	}
	r.eq(i, "pending", x.Pending, pending)
	if a := x.AWC; a != nil {
		r.eq(i, "active entity type", a.EntityType, s.AWC.EntityType)
		r.eq(i, "domain", a.Domain, s.AWC.Domain)
		if a.EntityID != nil {
			got := ""
			if s.AWC.Entity != nil {
				got = s.AWC.Entity.ID
			}
			if got != *a.EntityID {
				r.fail(i, "turn %d: active entity is %q, want %q", i+1, got, *a.EntityID)
			}
		}
		if a.Related != nil {
			var got []string
			for _, rel := range s.AWC.RelatedEntities {
				got = append(got, rel.Header.ID)
			}
			if !slices.Equal(got, a.Related) {
				r.fail(i, "turn %d: related entities are %s, want %s", i+1, strings.Join(got, ", "), strings.Join(a.Related, ", "))
			}
		}
	}
}
