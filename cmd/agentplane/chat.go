package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/conversation"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
)

const chatHelp = `Type a message. A number picks from the list shown last.
  /COMMAND ARG   run a command by id or alias, e.g. /mode ddr
  :trace         show or hide why the router decided what it did
  :quit          leave (or end input with Ctrl-D)
`

// maxPickerRows is how many items a picker shows in the terminal.
const maxPickerRows = 10

func (m *Main) chat(ctx context.Context, args []string) int {
	fs := m.flags("chat")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	mode := fs.String("mode", "", "mode to start in (default: the configuration's default mode)")
	showTrace := fs.Bool("trace", false, "print the router's trace after each turn")
	auditFile := fs.String("audit-file", "", "append the session's audit records to this JSON Lines file")
	db := m.dbFlag(fs)
	resume := fs.String("session", "", "resume this stored session instead of starting a new one")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	reg, tools, ok := m.load(*path)
	if !ok {
		return 1
	}
	defer tools.Close()
	store, closeStore, ok := m.openStore(*db)
	if !ok {
		return 1
	}
	defer closeStore()
	gopts := &gate.Options{Now: m.Now, Tools: tools.Registry}
	if *auditFile != "" {
		log, err := audit.OpenFile(*auditFile)
		if err != nil {
			fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
			return 1
		}
		defer log.Close()
		gopts.Sink = log
	}
	g, err := gate.New(reg, store, gopts)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	e := conversation.New(reg, g, store, &conversation.Options{Now: m.Now})
	var sess *agentplane.Session
	if *resume != "" {
		sess, err = store.Session(ctx, *resume)
	} else {
		sess, err = e.Start(ctx, *mode)
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", agentplane.ErrorMessage(err))
		return 1
	}
	c := &chatUI{m: m, reg: reg, e: e, sess: sess, trace: *showTrace}
	return c.loop(ctx)
}

// chatUI is the terminal chat: a client that can render pickers, as
// numbered lists.
type chatUI struct {
	m     *Main
	reg   *router.Registry
	e     *conversation.Engine
	sess  *agentplane.Session
	trace bool
	// the picker on screen: a number typed next selects picks[n-1]
	pickCommand string
	picks       []string
}

func (c *chatUI) printf(format string, args ...any) { fmt.Fprintf(c.m.Stdout, format, args...) }

func (c *chatUI) loop(ctx context.Context) int {
	m, _ := c.reg.Mode(c.sess.Mode)
	c.printf("agentplane chat — session %s, mode %s. Type :help for help.\n", c.sess.ID, m.DisplayName)
	in := bufio.NewScanner(c.m.Stdin)
	in.Buffer(make([]byte, 64<<10), 64<<10)
	for {
		c.printf("> ")
		if !in.Scan() {
			c.printf("\n")
			if err := in.Err(); err != nil && err != io.EOF {
				fmt.Fprintf(c.m.Stderr, "agentplane: reading input: %v\n", err)
				return 1
			}
			return 0
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case ":quit", ":q", ":exit":
			return 0
		case ":help":
			c.printf("%s", chatHelp)
			continue
		case ":trace":
			c.trace = !c.trace
			c.printf("trace %s\n", map[bool]string{true: "on", false: "off"}[c.trace])
			continue
		}
		if ctx.Err() != nil {
			return 0
		}
		c.turn(ctx, line)
	}
}

func (c *chatUI) turn(ctx context.Context, line string) {
	in := agentplane.TurnInput{Text: line, UI: true}
	if n, err := strconv.Atoi(line); err == nil && c.picks != nil {
		if n < 1 || n > len(c.picks) {
			c.printf("Pick a number from 1 to %d.\n", len(c.picks))
			return
		}
		in = agentplane.TurnInput{UI: true, Selection: &agentplane.Selection{CommandID: c.pickCommand, ID: c.picks[n-1]}}
	}
	c.picks, c.pickCommand = nil, ""
	t, err := c.e.Turn(ctx, c.sess.ID, in)
	if err != nil {
		c.printf("! %s (%s)\n", agentplane.ErrorMessage(err), agentplane.ErrorCode(err))
		return
	}
	c.sess = t.Session
	c.render(ctx, t)
	if c.trace {
		for _, l := range t.Decision.Trace {
			c.printf("  · %s\n", l)
		}
	}
	c.printf("  [mode: %s%s]\n", c.sess.Mode, awcLine(c.sess.AWC))
}

func (c *chatUI) render(ctx context.Context, t conversation.Turn) {
	d := t.Decision
	switch d.Action {
	case agentplane.ActionInvokeCommand:
		r := t.Result
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
		if d.ReasonCode == agentplane.ReasonConfirmationDeclined {
			c.printf("Cancelled; nothing was done.\n")
		}
		c.printf("… No LLM is configured yet, so this turn goes unanswered (the router handed it to the LLM: %s).\n", d.ReasonCode)
	}
}

// picker prints the picker's items, prefiltered, highlighting the best.
func (c *chatUI) picker(ctx context.Context, d agentplane.Decision) {
	src, ok := c.reg.Source(d.Source())
	if !ok {
		return
	}
	ix, _, err := src.Index(ctx)
	if err != nil {
		c.printf("✗ %v\n", err)
		return
	}
	var items []int32
	title := d.Source().CatalogID
	if cat, ok := c.reg.Catalog(d.CatalogID); ok {
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
