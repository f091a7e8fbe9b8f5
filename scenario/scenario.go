// Package scenario runs conversation test files: scripted turns against a
// configuration, with expectations on each turn's decision, result and the
// session afterwards. Users test their configuration the way they test code.
//
//	name: switch mode
//	mode: general
//	turns:
//	  - user: switch to DDR mode
//	    expect: {decision: invoke_command, command: set_mode, resolved_id: ddr, status: success, mode: ddr}
//
// A turn is one of `user: TEXT`, `select: {command: ID, id: ID}`,
// `confirm: true` (the human says yes) or `decline: true` (no). A turn the
// router hands to the LLM may script the model's replies, one per round
// (`llm: [{text: ..., tool_calls: [{name: ..., args: {...}}]}]`), and
// expect what the LLM turn did (`expect: {llm: {text, calls, question,
// prompt, offered, not_offered}}`): the calls run through the gate as a
// model's would.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// File is a conversation test file.
type File struct {
	Name  string   `yaml:"name"`
	Mode  string   `yaml:"mode"`  // the mode the session starts in; the default mode when empty
	UI    bool     `yaml:"ui"`    // the client renders pickers
	Roles []string `yaml:"roles"` // the principal's roles
	Turns []Turn   `yaml:"turns"`
}

// Turn is one scripted turn and what must follow from it.
type Turn struct {
	User    *string    `yaml:"user"`
	Select  *Selection `yaml:"select"`
	Confirm bool       `yaml:"confirm"`
	Decline bool       `yaml:"decline"`
	UI      *bool      `yaml:"ui"` // overrides the file's ui for this turn
	LLM     []Reply    `yaml:"llm"`
	Expect  Expect     `yaml:"expect"`
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

// Tools builds the tools a file's conversation runs with, on the test's
// clock; each file gets its own, so files do not share state.
type Tools func(now func() time.Time) (*tool.Registry, error)

// Run runs the conversation test file at path against the core's
// configuration, in a session of its own (an in-memory store, a scripted
// clock) and returns its failures (none when it passes). tools nil means
// the core's tools. The error is for a file that cannot be read or parsed:
// an empty file, a second YAML document, a file without turns, a turn that
// is not exactly one of user, select, confirm, decline.
func Run(ctx context.Context, c *core.Core, path string, tools Tools) ([]Failure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
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
	lines := turnLines(&root)
	r := &runner{path: path, lines: lines}
	for i, t := range f.Turns {
		kinds := 0
		for _, set := range []bool{t.User != nil, t.Select != nil, t.Confirm, t.Decline} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return nil, fmt.Errorf("%s:%d: turn %d: give exactly one of user, select, confirm, decline", path, r.line(i), i+1)
		}
	}

	clock := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	n := 0
	newID := func() string { n++; return fmt.Sprintf("id-%d", n) }
	var tr *tool.Registry
	if tools != nil {
		if tr, err = tools(now); err != nil {
			return nil, err
		}
	}
	fc, err := c.Derive(core.Derived{Store: memstore.New(), Now: now, NewID: newID, NewToken: newID, Tools: tr})
	if err != nil {
		return nil, err
	}
	defer fc.Close()
	sess, err := fc.Start(ctx, core.Start{Mode: f.Mode, Principal: "test"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, t := range f.Turns {
		in := agentplane.TurnInput{UI: f.UI, Roles: f.Roles}
		if t.UI != nil {
			in.UI = *t.UI
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
		tr, err := fc.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: "test", Input: in})
		if err != nil {
			r.fail(i, "turn %d: %v", i+1, err)
			continue
		}
		if t.LLM != nil || t.Expect.LLM != nil {
			if tr.Session, err = r.llmTurn(ctx, i, fc, sess.ID, f.Roles, &t, &tr); err != nil {
				return nil, err
			}
		}
		r.check(i, &t.Expect, &tr)
	}
	return r.failures, nil
}

// llmTurn runs the turn's scripted LLM turn, when the router handed the
// turn to the LLM, checks what it did, and returns the session after it.
func (r *runner) llmTurn(ctx context.Context, i int, c *core.Core, session string, roles []string, t *Turn, tr *core.Turn) (*agentplane.Session, error) {
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
	reply, err := llm.New(c, script, limits, nil).Turn(ctx, llm.TurnRequest{SessionID: session, Principal: "test", Roles: roles})
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

// turnLines returns the line of each turn in the file.
func turnLines(root *yaml.Node) []int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "turns" {
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
	lines    []int
	failures []Failure
}

func (r *runner) line(i int) int {
	if i < len(r.lines) {
		return r.lines[i]
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
