// Package router is the control plane router (CPR): a pure function from a
// user turn, a session snapshot and a registry to exactly one Decision, with
// a trace that says why.
//
// The order is fixed (docs/architecture.md, "A turn"): a structured selection, a
// pending confirmation, a pending picker, the slash form, triggers, a
// command recognised from its examples above a confidence threshold, and
// otherwise continue_with_llm. The router never executes anything; the gate
// does, and it is the only thing that changes a session.
//
//	reg, _ := registry.New(cfg, nil)
//	rt, _ := router.New(reg)
//	d, _ := rt.Route(ctx, sess, agentplane.TurnInput{Text: "switch to ddr mode", Now: now})
//	fmt.Println(d.Action, d.CommandID, d.ResolvedID) // invoke_command set_mode ddr
package router

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

// maxHits bounds how many trigger matches one turn evaluates.
const maxHits = 8

// Router routes turns for one compiled configuration: its triggers
// expanded and indexed, its slash names, its example model trained. Build
// it once at load time; it is immutable and safe for concurrent use.
type Router struct {
	reg        *registry.Registry
	commands   []*agentplane.CommandDefinition
	commandIdx map[string]int
	slash      map[string]int // command id or alias -> command index
	triggers   *trigger.Set
	fillers    trigger.Fillers
	patterns   [][]*trigger.Pattern                               // command index -> its triggers
	detector   *exemplar.Model                                    // commands recognised from examples; nil without any
	labelCmd   []int                                              // example model label -> command index
	negLabel   int                                                // the label of the negative examples; -1 without any
	trained    [sha256.Size]byte                                  // what detector was trained on (trainingKey)
	cmdLabel   []int                                              // command index -> example model label, -1 without examples
	shapeCache shapeCache                                         // the shapes of examples and trigger phrasings
	droppable  map[string]bool                                    // words a shape may leave out
	registers  []register                                         // command index -> how its examples and triggers ask for it
	heads      map[string]bool                                    // the words any command's examples and trigger phrasings begin with
	slotWords  map[*agentplane.CommandDefinition]map[string]uint8 // a command -> the words that stand for its item without naming one
	recognise  map[string]bool                                    // mode -> some command of it may be recognised from examples alone
}

// New compiles the registry's commands for routing: it parses and indexes
// their triggers and trains the model of their examples.
func New(reg *registry.Registry) (*Router, error) {
	return NewAfter(reg, nil)
}

// NewAfter is New reusing what prev, the router of an earlier
// configuration, computed from the same inputs: the model trained on the
// commands' examples when those, the trigger phrasings and the negative
// examples are the same. A reload then retrains only what changed. prev
// may be nil.
func NewAfter(reg *registry.Registry, prev *Router) (*Router, error) {
	r := &Router{
		reg:        reg,
		commands:   reg.Commands(),
		commandIdx: map[string]int{},
		slash:      map[string]int{},
		triggers:   trigger.NewSet(),
		fillers:    trigger.NewFillers(reg.Settings().Fillers),
		droppable:  droppableWords(reg.Settings().Fillers),
	}
	patterns := make([][]*trigger.Pattern, len(r.commands))
	for i, c := range r.commands {
		r.commandIdx[c.ID] = i
		r.slash[c.ID] = i
		for _, a := range c.Aliases {
			r.slash[a] = i
		}
		for _, t := range c.Triggers {
			p, err := trigger.Parse(t)
			if err != nil {
				return nil, fmt.Errorf("command %q: %w", c.ID, err)
			}
			r.triggers.Add(i, p)
			patterns[i] = append(patterns[i], p)
		}
	}
	r.patterns = patterns
	var err error
	if r.detector, r.labelCmd, r.negLabel, r.trained, err = trainExamples(r.fillers, r.commands, patterns, reg.Settings().NegativeExamples, prev); err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}
	r.cmdLabel = make([]int, len(r.commands))
	for i := range r.cmdLabel {
		r.cmdLabel[i] = -1
	}
	for l, i := range r.labelCmd {
		r.cmdLabel[i] = l
	}
	r.recognise = map[string]bool{}
	for _, m := range reg.Config().Modes {
		for _, tb := range reg.ModeToolboxes(m.Key) {
			for _, i := range reg.ToolboxCommands(tb.ID) {
				c := r.commands[i]
				r.recognise[m.Key] = r.recognise[m.Key] || c.Kind == agentplane.KindLauncher || len(c.Examples) > 0
			}
		}
	}
	bySource := map[agentplane.ResolverSource]map[string]uint8{}
	r.slotWords = map[*agentplane.CommandDefinition]map[string]uint8{}
	for _, c := range r.commands {
		m, ok := bySource[c.Source]
		if !ok {
			m = map[string]uint8{}
			for w := range kindWords(reg, c.Source) {
				m[w] |= wordKind
			}
			for w := range r.browsingWords(c.Source) {
				m[w] |= wordKind
			}
			for w := range determiners {
				m[w] |= wordDeterminer
			}
			for w := range deictics {
				m[w] |= wordDeictic
			}
			bySource[c.Source] = m
		}
		r.slotWords[c] = m
	}
	r.registers = make([]register, len(r.commands))
	r.heads = map[string]bool{}
	for i, c := range r.commands {
		r.registers[i] = registerOf(r.fillers, c, patterns[i])
		for h := range r.registers[i].heads {
			r.heads[h] = true
		}
	}
	if r.sourcesAtHand() {
		// made now, not by the first turns after a reload, which would
		// all wait for one of them to make them
		r.shapes(context.Background())
	}
	return r, nil
}

// Registry returns the compiled configuration the router routes for.
func (r *Router) Registry() *registry.Registry { return r.reg }

// Route decides what to do with one turn. sess is read, never changed; a
// nil session is a fresh session in the default mode. in.Now is the turn's
// time (zero means time.Now) and decides whether pending state has expired.
//
// Route returns an error, with an agentplane error code and nothing decided,
// only for malformed input: text over agentplane.MaxInputBytes
// (input_too_long), invalid UTF-8 or control characters (invalid_input), or
// a selection naming an unknown command (unknown_action), an inactive one
// (inactive_action) or an id its source does not hold (invalid_args).
func (r *Router) Route(ctx context.Context, sess *agentplane.Session, in agentplane.TurnInput) (agentplane.Decision, error) {
	if err := checkInput(&in); err != nil {
		return agentplane.Decision{}, err
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	t := &turn{ctx: ctx, rt: r, reg: r.reg, in: in, sess: sess, buf: make([]byte, 0, 512)}
	if sess == nil {
		t.sess = &agentplane.Session{}
	}
	t.mode = r.reg.ModeOf(t.sess.Mode)
	if t.mode != t.sess.Mode && t.sess.Mode != "" {
		t.tracef("session mode %q is not configured; using the default mode %q", t.sess.Mode, t.mode)
	}
	return t.route()
}

func checkInput(in *agentplane.TurnInput) error {
	if len(in.Text) > agentplane.MaxInputBytes {
		return agentplane.Errorf(agentplane.CodeInputTooLong, "text is %d bytes; the limit is %d", len(in.Text), agentplane.MaxInputBytes)
	}
	if !utf8.ValidString(in.Text) {
		return agentplane.Errorf(agentplane.CodeInvalidInput, "text is not valid UTF-8")
	}
	for i, r := range in.Text {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r >= 0x7f && r < 0xa0 {
			return agentplane.Errorf(agentplane.CodeInvalidInput, "text has control character U+%04X at byte %d", r, i)
		}
	}
	if s := in.Selection; s != nil && (s.CommandID == "" || s.ID == "") {
		return agentplane.Errorf(agentplane.CodeInvalidInput, "selection needs both command_id and id")
	}
	return nil
}

// turn is the state of one routing call.
type turn struct {
	ctx    context.Context
	rt     *Router
	reg    *registry.Registry
	in     agentplane.TurnInput
	sess   *agentplane.Session
	mode   string
	target string   // a launcher's target mode, while routing to its on_select command
	buf    []byte   // trace lines, each ended by '\n'
	words  []string // normalized words of the text, once computed
	norm   string   // the normalized text, once computed
	wbuf   [16]string
	// searched is the last slot text resolved at every tier, in searchedIn
	searched   string
	searchedIn *resolve.Index
	// asking: the text ends with a question mark — a command it names is
	// asked about, never run
	asking bool
	// sources: the version of each provider's answer the turn read
	// (Decision.Sources)
	sources map[string]string
}

// read notes that the turn read ix, an index of the source: a
// provider's answer is named in the decision (Decision.Sources). When a
// turn reads two answers of one source (another caller's shaped the
// examples), the first read is named.
func (t *turn) read(id agentplane.ResolverSource, ix *resolve.Index) {
	if ix == nil || ix.Version() == "" {
		return
	}
	k := id.String()
	if _, ok := t.sources[k]; ok {
		return
	}
	if t.sources == nil {
		t.sources = map[string]string{}
	}
	t.sources[k] = ix.Version()
}

// runMode is the mode commands are checked in: a launcher's target mode
// while routing to its on_select command, else the session's.
func (t *turn) runMode() string {
	if t.target != "" {
		return t.target
	}
	return t.mode
}

// targetMode is the TargetMode of the decisions made now: the launcher's
// target mode when it is not the session's.
func (t *turn) targetMode() string {
	if t.target != t.mode {
		return t.target
	}
	return ""
}

// toTarget sets the launcher's target mode for routing to its on_select
// command, and returns what restores the previous one.
func (t *turn) toTarget(launcher *agentplane.CommandDefinition) func() {
	prev := t.target
	if launcher.Kind == agentplane.KindLauncher && launcher.TargetMode != "" {
		t.target = launcher.TargetMode
		if launcher.TargetMode != t.mode {
			t.tracep("launcher ", launcher.ID, ": its selection runs in its target mode ", launcher.TargetMode)
		}
	}
	return func() { t.target = prev }
}

// slotText returns src[s:e] joined by spaces, where src is t.words or a
// subslice of it, as a substring of the normalized text (words there are
// separated by exactly one space), so it does not allocate.
func (t *turn) slotText(src []string, s, e int) string {
	base := cap(t.words) - cap(src) // index of src[0] in t.words
	off := 0
	for _, w := range t.words[:base+s] {
		off += len(w) + 1
	}
	end := off
	for _, w := range t.words[base+s : base+e] {
		end += len(w) + 1
	}
	return t.norm[off : end-1]
}

func (t *turn) tracef(format string, args ...any) {
	t.buf = fmt.Appendf(t.buf, format, args...)
	t.buf = append(t.buf, '\n')
}

// tracep adds a trace line made of parts; it does not allocate beyond
// growing the trace buffer, so the hot path uses it.
func (t *turn) tracep(parts ...string) {
	for _, p := range parts {
		t.buf = append(t.buf, p...)
	}
	t.buf = append(t.buf, '\n')
}

// lines turns the trace buffer into lines sharing one string.
func (t *turn) lines() []string {
	s := string(t.buf)
	out := make([]string, 0, strings.Count(s, "\n"))
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return out
}

func kindOf(src agentplane.ResolverSource) (kind, id string) {
	if src.ProviderID != "" {
		return "provider:", src.ProviderID
	}
	return "catalog:", src.CatalogID
}

// done finishes the trace with the decision itself and returns it.
func (t *turn) done(d agentplane.Decision) (agentplane.Decision, error) {
	switch d.Action {
	case agentplane.ActionInvokeCommand:
		t.tracep("decision: invoke_command ", d.CommandID, "(", d.ResolvedID, ")")
	case agentplane.ActionOpenPicker:
		k, id := kindOf(d.Source())
		t.tracep("decision: open_picker on ", k, id, " for ", d.CommandID)
	case agentplane.ActionAskQuestion:
		t.tracep("decision: ask_clarifying_question \"", d.QuestionText, "\"")
	case agentplane.ActionContinueLLM:
		t.tracep("decision: continue_with_llm (", d.ReasonCode, ")")
	}
	d.Trace = t.lines()
	d.Sources = t.sources
	return d, nil
}

func (t *turn) llm(reason string) (agentplane.Decision, error) {
	return t.done(agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: reason})
}

func (t *turn) route() (agentplane.Decision, error) {
	if t.in.Selection != nil {
		return t.selection()
	}
	if d, ok := t.pendingConfirmation(); ok {
		return t.done(d)
	}
	if d, ok := t.pendingPicker(); ok {
		return t.done(d)
	}
	text := strings.TrimSpace(t.in.Text)
	if strings.HasPrefix(text, "/") {
		return t.slash(text)
	}
	if len(t.normalizedWords()) == 0 {
		return t.llm(agentplane.ReasonEmptyInput)
	}
	if why := clause(text); why != "" {
		t.tracep("not a command: ", why)
		return t.llm(agentplane.ReasonNoControlIntent)
	}
	// "restart web-1?" asks at most; "can you restart web-1?" is a request
	if t.asking = asksOnly(text); t.asking {
		w := t.normalizedWords()
		t.asking = cap(t.rt.fillers.Strip(w)) == cap(w) && preamble(w) == 0
	}
	return t.triggers()
}

func (t *turn) normalizedWords() []string {
	if t.words == nil {
		t.norm = resolve.Normalize(t.in.Text)
		t.words = resolve.Fields(t.wbuf[:0], t.norm)
	}
	return t.words
}

// selection validates a structured pick and invokes its command.
func (t *turn) selection() (agentplane.Decision, error) {
	sel := t.in.Selection
	cmd, ok := t.reg.Command(sel.CommandID)
	if !ok {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeUnknownAction, "selection: unknown command %q", sel.CommandID)
	}
	if cmd.Kind == agentplane.KindLauncher {
		t.tracef("selection names launcher %q; its selections go to %q", cmd.ID, cmd.OnSelect)
		if !t.reg.CommandActive(t.mode, t.in.Roles, cmd.ID) {
			return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInactiveAction, "selection: launcher %q is not active in mode %q", cmd.ID, t.mode)
		}
		defer t.toTarget(cmd)()
		cmd, _ = t.reg.Command(cmd.OnSelect)
	} else if pp := t.sess.PendingPicker; pp != nil && pp.CommandID == cmd.ID && pp.Mode != "" && t.in.Now.Before(pp.ExpiresAt) {
		t.target = pp.Mode // the picker a launcher opened for its target mode
	}
	if !t.reg.CommandActive(t.runMode(), t.in.Roles, cmd.ID) {
		return agentplane.Decision{}, agentplane.Errorf(agentplane.CodeInactiveAction, "selection: command %q is not active in mode %q", cmd.ID, t.runMode())
	}
	item, err := t.lookup(cmd, sel.ID)
	if err != nil {
		return agentplane.Decision{}, err
	}
	t.tracef("selection: %s %q (%s) in %s", cmd.ID, item.Header.ID, item.Header.DisplayName, cmd.Source)
	return t.done(t.invokeOrConfirm(cmd, item))
}

// lookup finds id in the command's source, which must be active.
func (t *turn) lookup(cmd *agentplane.CommandDefinition, id string) (*agentplane.ResolverItem, error) {
	if !t.reg.SourceActive(t.runMode(), t.in.Roles, cmd.Source) {
		return nil, agentplane.Errorf(agentplane.CodeInactiveAction, "%s is not active in mode %q", cmd.Source, t.runMode())
	}
	ix, err := t.index(cmd.Source)
	if err != nil {
		return nil, err
	}
	item, ok := ix.Lookup(id)
	if !ok {
		return nil, agentplane.Errorf(agentplane.CodeInvalidArgs, "%q is not an item of %s", id, cmd.Source)
	}
	return item, nil
}

func (t *turn) index(src agentplane.ResolverSource) (*resolve.Index, error) {
	s, ok := t.reg.Source(src)
	if !ok {
		return nil, agentplane.Errorf(agentplane.CodeSourceUnavailable, "%s is not configured", src)
	}
	ctx := t.ctx
	if s.Provided() { // a provider answers the session's person
		ctx = resolve.WithCaller(ctx, resolve.SessionCaller(t.sess, t.in.Roles, t.mode))
	}
	ix, stale, err := s.Index(ctx)
	if err != nil {
		t.tracef("%v", err)
		return nil, err
	}
	t.read(src, ix)
	if stale != nil {
		t.tracef("serving cached items: refresh failed: %v", stale)
	}
	return ix, nil
}

// peek notes the answer of a provider that the gate will check an
// invocation in mode against (the caller's; fetched when there is none),
// so that the decision names it. A failure is the gate's to report.
func (t *turn) peek(src agentplane.ResolverSource, mode string) {
	s, ok := t.reg.Source(src)
	if !ok || !s.Provided() {
		return
	}
	if ix, _, err := s.Index(resolve.WithCaller(t.ctx, resolve.SessionCaller(t.sess, t.in.Roles, mode))); err == nil {
		t.read(src, ix)
	}
}

// invokeOrConfirm invokes the command with the item, or asks the human to
// confirm first when the command needs it.
func (t *turn) invokeOrConfirm(cmd *agentplane.CommandDefinition, item *agentplane.ResolverItem) agentplane.Decision {
	tm := t.targetMode()
	if cmd.NeedsConfirmation() {
		if why := registry.Preconditions(cmd, t.runMode(), t.sess.AWC); why != "" {
			// Asking first would have the human confirm what cannot run:
			// invoke, and the gate says why.
			t.tracep(cmd.ID, " needs confirmation, but its preconditions fail (", why, "): not asking")
			return agentplane.Decision{Action: agentplane.ActionInvokeCommand, CommandID: cmd.ID, ResolvedID: item.Header.ID, TargetMode: tm}
		}
		q := registry.ConfirmationQuestion(cmd, item.Header.DisplayName)
		t.tracep(cmd.ID, " needs confirmation; asking")
		return agentplane.Decision{Action: agentplane.ActionAskQuestion, QuestionText: q, Options: []string{"Yes", "No"},
			CommandID: cmd.ID, ResolvedID: item.Header.ID, TargetMode: tm}
	}
	if t.asking {
		t.tracep("the command is said as a question: asking before acting")
		return agentplane.Decision{Action: agentplane.ActionAskQuestion, QuestionText: registry.ConfirmationQuestion(cmd, item.Header.DisplayName),
			Options: []string{"Yes", "No"}, CommandID: cmd.ID, ResolvedID: item.Header.ID, TargetMode: tm}
	}
	t.tracep("invoke ", cmd.ID, "(", item.Header.ID, ")")
	return agentplane.Decision{Action: agentplane.ActionInvokeCommand, CommandID: cmd.ID, ResolvedID: item.Header.ID, TargetMode: tm}
}

var yesWords = set("yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay", "confirm", "confirmed", "do it", "go ahead", "yes please", "please do", "of course", "absolutely")
var noWords = set("no", "n", "nope", "nah", "cancel", "stop", "dont", "do not", "abort", "no thanks", "never mind", "nevermind", "decline")

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// answer classifies the text as yes (1), no (-1) or neither (0).
func (t *turn) answer() int {
	w := t.rt.fillers.Strip(t.normalizedWords())
	s := strings.Join(w, " ")
	switch {
	case yesWords[s]:
		return 1
	case noWords[s]:
		return -1
	}
	return 0
}

func (t *turn) pendingConfirmation() (agentplane.Decision, bool) {
	pc := t.sess.PendingConfirmation
	if pc == nil {
		return agentplane.Decision{}, false
	}
	if !t.in.Now.Before(pc.ExpiresAt) {
		t.tracef("pending confirmation of %s(%s) expired at %s; dropped", pc.CommandID, pc.ResolvedID, pc.ExpiresAt.UTC().Format(time.RFC3339))
		return agentplane.Decision{}, false
	}
	if pc.Tool != "" { // a tool call the LLM proposed: the gate checks it is still active
		switch t.answer() {
		case 1:
			t.tracef("confirmed the proposed %s(%s)", pc.Tool, pc.Args)
			return agentplane.Decision{Action: agentplane.ActionInvokeCommand, Tool: pc.Tool, Args: pc.Args, Confirmed: true}, true
		case -1:
			t.tracef("declined the proposed %s(%s)", pc.Tool, pc.Args)
			return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonConfirmationDeclined}, true
		}
		t.tracef("not a yes or no: the proposed %s was dropped", pc.Tool)
		return agentplane.Decision{}, false
	}
	mode := t.mode
	if pc.Mode != "" {
		mode = pc.Mode
	}
	if !t.reg.CommandActive(mode, t.in.Roles, pc.CommandID) {
		t.tracef("pending confirmation of %s is no longer active here; dropped", pc.CommandID)
		return agentplane.Decision{}, false
	}
	switch t.answer() {
	case 1:
		t.tracef("confirmed pending %s(%s)", pc.CommandID, pc.ResolvedID)
		if cmd, ok := t.reg.Command(pc.CommandID); ok {
			t.peek(cmd.Source, mode)
		}
		return agentplane.Decision{Action: agentplane.ActionInvokeCommand, CommandID: pc.CommandID, ResolvedID: pc.ResolvedID, Confirmed: true,
			TargetMode: pc.Mode}, true
	case -1:
		t.tracef("declined pending %s(%s)", pc.CommandID, pc.ResolvedID)
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonConfirmationDeclined}, true
	}
	t.tracef("not a yes or no: pending confirmation of %s(%s) dropped", pc.CommandID, pc.ResolvedID)
	return agentplane.Decision{}, false
}

func (t *turn) pendingPicker() (agentplane.Decision, bool) {
	pp := t.sess.PendingPicker
	if pp == nil {
		return agentplane.Decision{}, false
	}
	if !t.in.Now.Before(pp.ExpiresAt) {
		t.tracef("pending picker for %s expired", pp.CommandID)
		return agentplane.Decision{}, false
	}
	t.target = pp.Mode
	defer func() { t.target = "" }()
	cmd, ok := t.reg.Command(pp.CommandID)
	if !ok || !t.reg.CommandActive(t.runMode(), t.in.Roles, cmd.ID) || !t.reg.SourceActive(t.runMode(), t.in.Roles, cmd.Source) {
		t.tracef("pending picker for %s is no longer active here", pp.CommandID)
		return agentplane.Decision{}, false
	}
	ix, err := t.index(cmd.Source)
	if err != nil {
		return agentplane.Decision{}, false
	}
	if id, ok := t.optionChoice(pp); ok {
		if item, found := ix.Lookup(id); found {
			t.tracef("picked option %q from the pending question", id)
			return t.invokeOrConfirm(cmd, item), true
		}
	}
	text := strings.TrimSpace(t.in.Text)
	if strings.HasPrefix(text, "/") {
		return agentplane.Decision{}, false
	}
	res := ix.Resolve(text, 2)
	if res.Strict() {
		item := ix.Item(res.Items[0])
		t.tracef("%q resolved strictly in pending picker %s: %s", text, cmd.Source, item.Header.ID)
		return t.invokeOrConfirm(cmd, item), true
	}
	t.tracef("%q does not resolve strictly in pending picker %s (%s tier, %d items)", text, cmd.Source, res.Tier, len(res.Items))
	if len(pp.OptionIDs) > 0 {
		t.tracef("the pending question was not answered with one of its options: it is over, and nothing runs from it later")
	}
	return agentplane.Decision{}, false
}

// optionChoice reads "2", "#2", "option 2" or, for a question with one
// option, "yes" as a choice among the pending question's options.
func (t *turn) optionChoice(pp *agentplane.PendingPicker) (string, bool) {
	if len(pp.OptionIDs) == 0 {
		return "", false
	}
	w := t.normalizedWords()
	if len(w) == 2 && (w[0] == "option" || w[0] == "number" || w[0] == "no") {
		w = w[1:]
	}
	if len(w) == 1 {
		if n, err := strconv.Atoi(w[0]); err == nil && n >= 1 && n <= len(pp.OptionIDs) {
			return pp.OptionIDs[n-1], true
		}
	}
	if len(pp.OptionIDs) == 1 && t.answer() == 1 {
		return pp.OptionIDs[0], true
	}
	return "", false
}

// slash handles "/command argument".
func (t *turn) slash(text string) (agentplane.Decision, error) {
	name, arg, _ := strings.Cut(text[1:], " ")
	name = strings.ToLower(name)
	arg = strings.TrimSpace(arg)
	i, ok := t.rt.slash[name]
	if !ok {
		t.tracef("slash form /%s names no command", name)
		return t.llm(agentplane.ReasonUnknownCommand)
	}
	cmd := t.rt.commands[i]
	if !t.reg.CommandActive(t.mode, t.in.Roles, cmd.ID) {
		t.tracef("slash form /%s names %s, not active in mode %q", name, cmd.ID, t.mode)
		return t.llm(agentplane.ReasonInactiveCommand)
	}
	t.tracef("slash form /%s -> %s", name, cmd.ID)
	if arg == "" {
		return t.done(t.browse(cmd))
	}
	target := cmd
	if cmd.Kind == agentplane.KindLauncher {
		// the launcher's argument is the user's input for its picker:
		// resolved in its target catalog, for its on_select command
		target, _ = t.reg.Command(cmd.OnSelect)
		t.tracep("launcher ", cmd.ID, ": its argument is resolved for ", target.ID)
		defer t.toTarget(cmd)()
	}
	d, _ := t.resolveSlot(target, arg)
	return t.done(d)
}

// browse opens a picker on a command's catalog with no query: the launcher's
// target catalog (selections go to its on_select command), or an
// executable's own source. Without UI it asks one question listing the
// first items.
func (t *turn) browse(cmd *agentplane.CommandDefinition) agentplane.Decision {
	target := cmd
	if cmd.Kind == agentplane.KindLauncher {
		target, _ = t.reg.Command(cmd.OnSelect)
		defer t.toTarget(cmd)()
	}
	src := target.Source
	if !t.reg.SourceActive(t.runMode(), t.in.Roles, src) {
		t.tracef("%s is not active in mode %q", src, t.runMode())
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonUnresolved}
	}
	if t.in.UI {
		t.tracef("open picker on %s; a selection invokes %s", src, target.ID)
		return t.picker(target, "", "")
	}
	ix, err := t.index(src)
	if err != nil {
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonSourceUnavailable}
	}
	items := ix.Items(t.reg.Settings().MaxOptions)
	if len(items) == 0 {
		t.tracef("%s has no items", src)
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonUnresolved}
	}
	q := t.which(src) + "?"
	if ix.Len() > len(items) {
		q = fmt.Sprintf("%s? (showing %d of %d; or type a name)", t.which(src), len(items), ix.Len())
	}
	t.tracef("no UI: ask which item of %s for %s", src, target.ID)
	return t.question(target, q, ix, items)
}

// which begins a question asking for an item of src: "Which of the email
// templates", "Which of my loans" (a name that begins with a determiner
// takes no "the"), or, for a source with no display name whose items'
// entity type has one, "Which loan".
func (t *turn) which(src agentplane.ResolverSource) string {
	c, ok := t.reg.Catalog(src.CatalogID)
	if ok && c.DisplayName != c.ID { // the configuration names it
		return "Which of " + theUnlessDetermined(lowerWords(c.DisplayName))
	}
	if ok && t.reg.Config().EntityTypes[c.EntityType] != "" {
		return "Which " + lowerWords(t.reg.Config().EntityTypes[c.EntityType])
	}
	id := src.CatalogID
	if src.ProviderID != "" {
		id = src.ProviderID
	}
	return "Which of " + theUnlessDetermined(strings.ReplaceAll(id, "_", " "))
}

// ownDeterminers are the words that begin a name needing no "the" before
// it.
var ownDeterminers = map[string]bool{"the": true, "a": true, "an": true, "my": true, "our": true, "your": true, "his": true, "her": true,
	"its": true, "their": true, "this": true, "that": true, "these": true, "those": true, "all": true, "each": true, "every": true,
	"some": true, "any": true}

// theUnlessDetermined puts "the " before a name, unless it begins with a
// determiner of its own ("my loans").
func theUnlessDetermined(name string) string {
	first, _, _ := strings.Cut(name, " ")
	if ownDeterminers[strings.ToLower(first)] {
		return name
	}
	return "the " + name
}

// lowerWords lowercases the words of a name that are capitalised words
// ("My Loans" → "my loans"), not those that are acronyms or mixed
// ("CRM", "iPhone").
func lowerWords(name string) string {
	words := strings.Split(name, " ")
	for i, w := range words {
		r, size := utf8.DecodeRuneInString(w)
		if unicode.IsUpper(r) && strings.ToLower(w[size:]) == w[size:] {
			words[i] = string(unicode.ToLower(r)) + w[size:]
		}
	}
	return strings.Join(words, " ")
}

func (t *turn) picker(cmd *agentplane.CommandDefinition, prefilter, highlight string) agentplane.Decision {
	return agentplane.Decision{Action: agentplane.ActionOpenPicker, PickerType: cmd.PickerType,
		CatalogID: cmd.Source.CatalogID, ProviderID: cmd.Source.ProviderID,
		PrefilterText: prefilter, HighlightID: highlight, CommandID: cmd.ID, TargetMode: t.targetMode()}
}

func (t *turn) question(cmd *agentplane.CommandDefinition, q string, ix *resolve.Index, items []int32) agentplane.Decision {
	d := agentplane.Decision{Action: agentplane.ActionAskQuestion, QuestionText: q, CommandID: cmd.ID, TargetMode: t.targetMode()}
	for _, i := range items {
		it := ix.Item(i)
		d.Options = append(d.Options, it.Header.DisplayName)
		d.OptionIDs = append(d.OptionIDs, it.Header.ID)
	}
	apart(d.Options, ix, items)
	return d
}

// apart makes options with the same display name ("Maria Garcia" twice)
// say what tells them apart: the item's description, or its id when that
// is the same too.
func apart(options []string, ix *resolve.Index, items []int32) {
	labels := slices.Clone(options)
	for i := range options {
		for j := range options {
			if i == j || labels[i] != labels[j] {
				continue
			}
			it, other := ix.Item(items[i]), ix.Item(items[j])
			if it.Description != "" && it.Description != other.Description {
				options[i] = labels[i] + " — " + it.Description
			} else {
				options[i] = labels[i] + " (" + it.Header.ID + ")"
			}
			break
		}
	}
}

// clearBest returns the candidate to highlight in a picker: the first,
// when it is closer to the query than the second (fewer words beyond or
// short of it) or more used; "" when the two are ranked by id alone —
// nothing is pre-highlighted by id order.
func clearBest(ix *resolve.Index, res resolve.Result) string {
	first := ix.Item(res.Items[0])
	if len(res.Items) == 1 {
		return first.Header.ID
	}
	second := ix.Item(res.Items[1])
	n := strings.Count(res.Query, " ") + 1
	dist := func(it *agentplane.ResolverItem) int {
		d := len(resolve.Fields(nil, resolve.Normalize(it.Header.DisplayName))) - n
		return max(d, -d)
	}
	if first.UsageCount != second.UsageCount || dist(first) != dist(second) {
		return first.Header.ID
	}
	return ""
}

// quality ranks what resolving a slot achieved, for choosing between
// several trigger matches.
const (
	qualityNone      = iota // nothing resolved
	qualityCandidate        // a picker or question
	qualityStrict           // a strict resolution
)

// resolveSlot resolves slot text against the command's source and applies
// the UI-first rules.
func (t *turn) resolveSlot(cmd *agentplane.CommandDefinition, text string) (agentplane.Decision, int) {
	return t.resolveSlotTiers(cmd, text, false)
}

// resolveSlotTiers is resolveSlot; with strictOnly it looks only for a
// strict resolution (the exact tier), for when a candidate answer is
// already in hand and only a strict one could beat it.
func (t *turn) resolveSlotTiers(cmd *agentplane.CommandDefinition, text string, strictOnly bool) (agentplane.Decision, int) {
	if !t.reg.SourceActive(t.runMode(), t.in.Roles, cmd.Source) {
		t.tracef("%s is not active in mode %q", cmd.Source, t.runMode())
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonUnresolved}, qualityNone
	}
	ix, err := t.index(cmd.Source)
	if err != nil {
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonSourceUnavailable}, qualityNone
	}
	var res resolve.Result
	if strictOnly {
		res = ix.ResolveExact(text, t.reg.Settings().MaxOptions)
	} else {
		res = ix.Resolve(text, t.reg.Settings().MaxOptions)
	}
	if res.Tier != resolve.TierExact {
		if d, q, ok := t.missingItem(cmd, ix, text); ok {
			return d, q
		}
		// pointing and kind words around the item's name ("the web-1
		// service") are accounted for: the name is what they hold
		if !t.edged(cmd, text) {
			// no pointing or kind word at an edge: nothing to cut
		} else if name, cres, ok := t.nameWithin(cmd, ix, res.Query, strictOnly); ok &&
			(cres.Tier == resolve.TierExact || res.Tier == resolve.TierNone) {
			t.tracep("\"", text, "\": the words around \"", name, "\" point at it or name its kind")
			res, text = cres, name
		}
	}
	// every word must be accounted for: a slot that names no item as a
	// whole is no item with words left over ("restart web-1 is the
	// first step") — the trigger does not match
	if !strictOnly {
		t.searched, t.searchedIn = res.Query, ix
	}
	if res.Tier == resolve.TierNone && !strictOnly && t.unaccounted(cmd, ix, res.Query) {
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonNoControlIntent}, qualityNone
	}
	note := ""
	if strictOnly {
		note = " (exact tier only: a candidate answer is already in hand)"
	}
	if res.Truncated {
		note += ", search budget reached"
	}
	k, id := kindOf(cmd.Source)
	t.tracep("resolve \"", res.Query, "\" in ", k, id, ": ", res.Tier.String(), " tier, ", strconv.Itoa(len(res.Items)), " item(s)", note)
	switch {
	case res.Strict():
		return t.invokeOrConfirm(cmd, ix.Item(res.Items[0])), qualityStrict
	case len(res.Items) == 0:
		t.tracep(cmd.ID, " matched but \"", text, "\" resolves to nothing")
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonUnresolved}, qualityNone
	case t.in.UI:
		best := clearBest(ix, res)
		if best == "" {
			t.tracep("not strict: open picker on ", k, id, " prefiltered with \"", text, "\", nothing highlighted: the first candidates are as close as each other")
		} else {
			t.tracep("not strict: open picker on ", k, id, " prefiltered with \"", text, "\", highlighting ", best)
		}
		return t.picker(cmd, text, best), qualityCandidate
	default:
		q := t.which(cmd.Source) + " did you mean?"
		if len(res.Items) == 1 {
			q = fmt.Sprintf("Did you mean '%s'?", ix.Item(res.Items[0]).Header.DisplayName)
		}
		t.tracep("not strict, no UI: ask which of ", strconv.Itoa(len(res.Items)), " candidate(s)")
		return t.question(cmd, q, ix, res.Items), qualityCandidate
	}
}

// cmdBest is the best a command's matched triggers achieved in a turn.
type cmdBest struct {
	cmd      *agentplane.CommandDefinition
	decision agentplane.Decision
	quality  int
}

// between is the question naming two or more commands whose triggers
// account for the utterance equally well ("open will hart": a patient and
// an invoice), in the order of their ids — never the file's.
func (t *turn) between(tied []cmdBest) agentplane.Decision {
	slices.SortFunc(tied, func(a, b cmdBest) int { return strings.Compare(a.cmd.ID, b.cmd.ID) })
	var opts []string
	ids := make([]string, 0, len(tied))
	for _, b := range tied {
		label := b.cmd.DisplayName
		if label == "" {
			label = b.cmd.ID
		}
		if id := b.decision.ResolvedID; id != "" {
			if ix, err := t.index(b.cmd.Source); err == nil {
				if it, ok := ix.Lookup(id); ok {
					label += ": " + it.Header.DisplayName
				}
			}
		}
		opts = append(opts, label)
		ids = append(ids, b.cmd.ID)
	}
	t.tracep("the triggers of ", strings.Join(ids, " and "), " account for the words equally well: asking which, not taking the first in the file")
	q := "Which do you mean: " + strings.Join(opts[:len(opts)-1], ", ") + " or " + opts[len(opts)-1] + "?"
	return agentplane.Decision{Action: agentplane.ActionAskQuestion, QuestionText: q, Options: opts}
}

// triggers matches the active commands' triggers against the whole
// utterance, and against it with politeness fillers stripped one phrase at
// a time (see trigger.Fillers.Variants), and takes the match whose
// resolution is best (strict, then candidates), the least stripped and
// earliest first: a filler is stripped only when what is left resolves
// better, so an item named "Please Please Me" or "Apocalypse Now" keeps
// its words.
func (t *turn) triggers() (agentplane.Decision, error) {
	words := t.normalizedWords()
	var hitsBuf [maxHits * 2]trigger.Hit
	var variantsBuf [8][]string
	variants := t.rt.fillers.Variants(words, variantsBuf[:0])
	hits := hitsBuf[:0]
	var fromBuf [maxHits * 2]int
	from := fromBuf[:0] // hit -> its variant
	for vi, v := range variants {
		before := len(hits)
		hits = t.rt.triggers.Match(v, hits)
		if vi > 0 && len(hits) > before {
			t.tracef("politeness fillers stripped: %q", strings.Join(v, " "))
		}
		for range hits[before:] {
			from = append(from, vi)
		}
	}
	// the best decision of each command whose trigger matched: between
	// two commands, the one that accounts for every word exactly (strict)
	// wins; two at the same best are one question naming both, never the
	// first in the file
	var byCmdBuf [2]cmdBest // most turns match one or two commands; zeroing maxHits decisions cost more than the rest of the loop
	byCmd := byCmdBuf[:0]
	evaluated := 0
	for i, h := range hits {
		cmd := t.rt.commands[h.Owner]
		if !t.reg.CommandActive(t.mode, t.in.Roles, cmd.ID) {
			continue // inactive commands are invisible, not even traced
		}
		k := -1
		for j := range byCmd {
			if byCmd[j].cmd == cmd {
				k = j
				break
			}
		}
		if k >= 0 && byCmd[k].quality == qualityStrict {
			continue // nothing beats a strict resolution, and earlier wins ties
		}
		if evaluated++; evaluated > maxHits {
			t.tracef("more than %d trigger matches; the rest are ignored", maxHits)
			break
		}
		var d agentplane.Decision
		q := qualityCandidate
		if !h.Pattern.HasSlot() {
			t.tracep("trigger of ", cmd.ID, " matched: \"", h.Pattern.Source, "\"")
			if d = t.browse(cmd); d.Action == agentplane.ActionContinueLLM {
				q = qualityNone
			}
		} else {
			slot := t.slotText(variants[from[i]], h.Start, h.End)
			if h.Possessive {
				slot = slot[:len(slot)-1] // "mira holms account": the item is "mira holm"
			}
			t.tracep("trigger of ", cmd.ID, " matched: \"", h.Pattern.Source, "\" with {", h.Pattern.SlotName, "} = \"", slot, "\"")
			d, q = t.resolveSlotTiers(cmd, slot, k >= 0 && byCmd[k].quality >= qualityCandidate)
		}
		switch {
		case k < 0:
			byCmd = append(byCmd, cmdBest{cmd: cmd, quality: q})
			byCmd[len(byCmd)-1].decision = d
		case q > byCmd[k].quality:
			byCmd[k].decision, byCmd[k].quality = d, q
		}
	}
	bestAt, bestQuality, ties := -1, -1, 0
	for k := range byCmd {
		switch q := byCmd[k].quality; {
		case q > bestQuality:
			bestAt, bestQuality, ties = k, q, 1
		case q == bestQuality:
			ties++
		}
	}
	if ties > 1 && bestQuality >= qualityCandidate {
		var tied []cmdBest
		for k := range byCmd {
			if byCmd[k].quality == bestQuality {
				tied = append(tied, byCmd[k])
			}
		}
		return t.done(t.between(tied))
	}
	var best agentplane.Decision
	if bestAt >= 0 {
		best = byCmd[bestAt].decision
	}
	if len(byCmd) == 0 {
		return t.examples()
	}
	if bestQuality == qualityNone && t.rt.recognise[t.mode] {
		// a trigger's words matched, but what it names is not there:
		// another command's examples may fit the utterance (a mode with
		// no launcher and no examples has none that could)
		t.tracep("no matched trigger named anything: trying the examples")
		return t.examplesOr(best.ReasonCode)
	}
	return t.done(best)
}
