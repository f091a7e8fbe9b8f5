package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/resolve"
)

const chatHelp = `Type a message. A number picks from the list shown last.
  /COMMAND ARG   run a command by id or alias, e.g. /mode ddr
  :trace         show or hide why the router decided what it did
  :quit          leave (or end input with Ctrl-D; Ctrl-C interrupts)
`

// maxPickerRows is how many items a picker shows in the terminal.
const maxPickerRows = 10

// maxChatLine is the longest line the chat reads; a longer one is refused.
const maxChatLine = 64 << 10

func (m *Main) chat(ctx context.Context, args []string) error {
	fs := m.flags("chat", "[--config FILE] [--db DB] [--session ID] [--mode KEY] [--trace] [--audit-file FILE]")
	c := m.commonFlags(fs, true)
	mode := fs.String("mode", "", "mode to start in (default: the configuration's default mode)")
	showTrace := fs.Bool("trace", false, "print the router's trace after each turn")
	auditFile := fs.String("audit-file", "", "export the session's audit chain to this JSON Lines file, kept complete after every turn")
	resume := fs.String("session", "", "resume this stored session instead of starting a new one")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rt, err := m.open(ctx, c, plane.Options{LLM: true})
	if err != nil {
		return err
	}
	defer rt.Close(time.Minute)
	if !rt.Core.ModeOK(*mode) {
		return fmt.Errorf("unknown mode %q", *mode)
	}
	var sess *agentplane.Session
	if *resume != "" {
		var notes []string
		sess, notes, err = rt.Core.Resume(ctx, *resume, principal)
		for _, n := range notes {
			fmt.Fprintf(m.Stderr, "agentplane: note: %s\n", n)
		}
		if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
			return fmt.Errorf("no session %q in %s", *resume, rt.DB)
		}
	} else {
		sess, err = rt.Core.Start(ctx, core.Start{Mode: *mode, Principal: principal})
	}
	if err != nil {
		return err
	}
	ui := &chatUI{m: m, c: rt.Core, step: rt.Step, sess: sess, trace: *showTrace, agent: rt.Agent != nil}
	if *auditFile != "" {
		if ui.export, err = audit.OpenFile(*auditFile); err != nil {
			return err
		}
		defer ui.export.Close()
		if err := ui.exportAudit(ctx); err != nil {
			return err
		}
	}
	return ui.loop(ctx)
}

// chatUI is the terminal chat: a client that can render pickers, as
// numbered lists.
type chatUI struct {
	m      *Main
	c      *core.Core
	step   func(context.Context, plane.StepRequest) (plane.Step, error) // the runtime's: one conversation step
	agent  bool                                                         // an LLM is configured
	sess   *agentplane.Session
	trace  bool
	export *audit.File // the --audit-file, or nil
	// the picker on screen: a number typed next selects picks[n-1]
	pickCommand string
	picks       []string
}

func (c *chatUI) printf(format string, args ...any) { fmt.Fprintf(c.m.Stdout, format, args...) }

// exportAudit brings the --audit-file up to date with the session's chain
// in the store: a file behind (a new file, a crash after a commit) catches
// up; a failure is reported, never ignored.
func (c *chatUI) exportAudit(ctx context.Context) error {
	if c.export == nil {
		return nil
	}
	return c.export.Export(ctx, c.sess.ID, func(ctx context.Context, after int64) ([]audit.Record, error) {
		return c.c.Records(ctx, c.sess.ID, after)
	})
}

// lines reads input lines in the background, so that Ctrl-C ends the chat
// at once even while it waits for a line. It stops when done is closed.
func lines(r io.Reader, done <-chan struct{}) <-chan inputLine {
	out := make(chan inputLine)
	go func() {
		defer close(out)
		in := bufio.NewScanner(r)
		in.Buffer(make([]byte, 64<<10), maxChatLine)
		send := func(l inputLine) bool {
			select {
			case out <- l:
				return true
			case <-done:
				return false
			}
		}
		for in.Scan() {
			if !send(inputLine{text: in.Text()}) {
				return
			}
		}
		if err := in.Err(); err != nil {
			send(inputLine{err: err})
		}
	}()
	return out
}

type inputLine struct {
	text string
	err  error
}

func (c *chatUI) loop(ctx context.Context) error {
	m, _ := c.c.View().Registry().Mode(c.sess.Mode)
	name := c.sess.Mode
	if m != nil {
		name = m.DisplayName
	}
	c.printf("agentplane chat — session %s, mode %s. Type :help for help.\n", c.sess.ID, name)
	done := make(chan struct{})
	defer close(done)
	input := lines(c.m.Stdin, done)
	for {
		c.printf("> ")
		var l inputLine
		var ok bool
		select {
		case <-ctx.Done():
			c.printf("\n")
			return errInterrupted
		case l, ok = <-input:
		}
		if !ok {
			c.printf("\n")
			return nil
		}
		if l.err != nil {
			c.printf("\n")
			if errors.Is(l.err, bufio.ErrTooLong) {
				return fmt.Errorf("a line longer than %d bytes; nothing after it was read", maxChatLine)
			}
			return fmt.Errorf("reading input: %w", l.err)
		}
		line := strings.TrimSpace(l.text)
		switch line {
		case "":
			continue
		case ":quit", ":q", ":exit":
			return nil
		case ":help":
			c.printf("%s", chatHelp)
			continue
		case ":trace":
			c.trace = !c.trace
			c.printf("trace %s\n", map[bool]string{true: "on", false: "off"}[c.trace])
			continue
		}
		if err := c.turn(ctx, line); err != nil {
			return err
		}
	}
}

// turn takes one turn. A problem with the input is shown and the chat goes
// on; a store or export that failed is returned, and ends the chat.
func (c *chatUI) turn(ctx context.Context, line string) error {
	in := agentplane.TurnInput{Text: line, UI: true}
	if n, err := strconv.Atoi(line); err == nil && c.picks != nil {
		if n < 1 || n > len(c.picks) {
			c.printf("Pick a number from 1 to %d.\n", len(c.picks))
			return nil
		}
		in = agentplane.TurnInput{UI: true, Selection: &agentplane.Selection{CommandID: c.pickCommand, ID: c.picks[n-1]}}
	}
	c.picks, c.pickCommand = nil, ""
	streamed := false
	st, err := c.step(ctx, plane.StepRequest{SessionID: c.sess.ID, Principal: principal, Input: in, OnText: func(delta string) {
		if !streamed {
			c.printf("… ")
			streamed = true
		}
		c.printf("%s", delta)
	}})
	if streamed {
		c.printf("\n")
	}
	if err != nil && st.Turn.Session == nil { // the turn was not taken
		if code := agentplane.ErrorCode(err); code != agentplane.CodeInternal {
			c.printf("! %s (%s)\n", agentplane.ErrorMessage(err), code)
			if code == agentplane.CodeVersionConflict {
				if s, err := c.c.Session(ctx, c.sess.ID); err == nil {
					c.sess = s
				}
			}
			return nil
		}
		return err
	}
	c.sess = st.Session
	c.render(ctx, st)
	if err != nil { // the turn was taken; the LLM's part failed
		c.printf("! %s\n", agentplane.ErrorMessage(err))
	}
	if c.trace {
		for _, l := range st.Turn.Decision.Trace {
			c.printf("  · %s\n", l)
		}
	}
	if err := c.exportAudit(ctx); err != nil {
		return err
	}
	c.printf("  [mode: %s%s]\n", c.sess.Mode, awcLine(c.sess.AWC))
	return nil
}

func (c *chatUI) render(ctx context.Context, st plane.Step) {
	d := st.Turn.Decision
	switch d.Action {
	case agentplane.ActionInvokeCommand:
		r := st.Turn.Result
		switch r.Status {
		case agentplane.StatusSuccess:
			c.printf("✓ %s\n", r.Message)
		case agentplane.StatusConfirmationRequired:
			c.printf("? %s (confirmation required)\n", r.Message)
		default:
			c.printf("✗ %s [%s]\n", r.Message, r.Error.Code)
		}
	case agentplane.ActionOpenPicker:
		c.picker(ctx, d)
	case agentplane.ActionAskQuestion:
		c.printf("? %s\n", d.QuestionText)
		if d.IsConfirmationQuestion() {
			c.printf("  (yes / no)\n")
			return
		}
		for i, o := range d.Options {
			c.printf("  %d. %s\n", i+1, o)
		}
	case agentplane.ActionContinueLLM:
		switch {
		case !st.HandedOver():
			c.printf("Cancelled; nothing was done.\n")
		case !c.agent:
			c.printf("… No LLM is configured yet, so this turn goes unanswered (the router handed it to the LLM: %s).\n", d.ReasonCode)
		case st.LLM != nil:
			c.llmReply(*st.LLM)
		}
	}
}

// llmReply prints what the LLM's tool calls did (its text streamed
// already); a call that needs confirmation is asked here.
func (c *chatUI) llmReply(reply llm.Reply) {
	for _, r := range reply.Calls {
		switch r.Status {
		case agentplane.StatusSuccess:
			c.printf("  ↳ %s: %s\n", r.Tool, r.Message)
		case agentplane.StatusConfirmationRequired:
		default:
			c.printf("  ↳ %s: %s [%s]\n", r.Tool, r.Message, r.Error.Code)
		}
	}
	if reply.Question != "" {
		c.printf("? %s\n  (yes / no)\n", reply.Question)
	}
	if reply.Failure != "" {
		c.printf("! %s\n", reply.Failure)
	}
}

// picker prints the picker's items, prefiltered, highlighting the best.
func (c *chatUI) picker(ctx context.Context, d agentplane.Decision) {
	reg := c.c.View().Registry()
	src, ok := reg.Source(d.Source())
	if !ok {
		return
	}
	if src.Provided() {
		ctx = resolve.WithCaller(ctx, resolve.SessionCaller(c.sess, nil, ""))
	}
	ix, _, err := src.Index(ctx)
	if err != nil {
		c.printf("✗ %s\n", agentplane.ErrorMessage(err))
		return
	}
	var items []int32
	title := d.Source().CatalogID
	if cat, ok := reg.Catalog(d.CatalogID); ok {
		title = cat.DisplayName
	}
	if d.PrefilterText != "" {
		items = ix.Resolve(d.PrefilterText, maxPickerRows).Items
		c.printf("Pick from %s matching %q:\n", title, d.PrefilterText)
	} else {
		items = ix.Items(maxPickerRows)
		c.printf("Pick from %s:\n", title)
	}
	c.pickCommand = d.CommandID
	for i, it := range items {
		item := ix.Item(it)
		mark := " "
		if item.Header.ID == d.HighlightID {
			mark = "*"
		}
		c.printf(" %s%d. %s (%s)\n", mark, i+1, item.Header.DisplayName, item.Header.ID)
		c.picks = append(c.picks, item.Header.ID)
	}
	if ix.Len() > len(items) && d.PrefilterText == "" {
		c.printf("  … %d more; type a name to narrow down\n", ix.Len()-len(items))
	}
}

func awcLine(a agentplane.ActiveWorkContext) string {
	if a.Entity == nil {
		return " | nothing active"
	}
	var b strings.Builder
	fmt.Fprintf(&b, " | active %s: %s (%s)", a.EntityType, a.Entity.DisplayName, a.Entity.ID)
	for _, r := range a.RelatedEntities {
		fmt.Fprintf(&b, " | %s %s: %s (%s)", r.Role, r.EntityType, r.Header.DisplayName, r.Header.ID)
	}
	return b.String()
}
