package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/workflow"
)

// workflowVerbs are the subcommands of `agentplane workflow`.
var workflowVerbs = []verb{
	{"validate", "[--config FILE] FILE"},
	{"run", "[--config FILE] [--db DB] [--session ID] [--mode MODE] [--resume-policy manual|automatic] FILE"},
	{"status", "[--config FILE] [--db DB] WORKFLOW"},
	{"approve", "[--config FILE] [--db DB] [--reject] [--feedback TEXT] WORKFLOW CHECKPOINT"},
	{"continue", "[--config FILE] [--db DB] WORKFLOW"},
	{"abort", "[--config FILE] [--db DB] --reason TEXT WORKFLOW"},
	{"resume", "[--config FILE] [--db DB] [--checkpoint ID] [--decision continue|rollback|modify] [--modifications JSON] WORKFLOW"},
}

// workflowCmd is `agentplane workflow ...`: validate a definition, or run
// a workflow and answer its pauses, as the local principal, against the
// database (another process holding the workflow — serve — processes the
// command; this one waits for it), printing its events until it pauses
// or ends.
func (m *Main) workflowCmd(ctx context.Context, args []string) error {
	sub, use, err := subcommand("workflow", workflowVerbs, args, "")
	if err != nil {
		return err
	}
	args = args[1:]
	if sub == "validate" {
		return m.workflowValidate(ctx, args)
	}
	fs := m.flags("workflow "+sub, use)
	c := m.commonFlags(fs, true)
	var (
		session, mode, policy         *string
		reject                        *bool
		feedback, reason              *string
		checkpoint, decision, changes *string
		want                          = 1
	)
	switch sub {
	case "run":
		session = fs.String("session", "", "the session the tasks run in (default: a new one)")
		mode = fs.String("mode", "", "the new session's mode (default: the default mode)")
		policy = fs.String("resume-policy", "manual", "after a crash: manual (wait for workflow resume) or automatic")
	case "approve":
		reject = fs.Bool("reject", false, "reject the layer: the workflow is aborted")
		feedback = fs.String("feedback", "", "why")
		want = 2
	case "abort":
		reason = fs.String("reason", "", "why (required)")
	case "resume":
		checkpoint = fs.String("checkpoint", "", "the checkpoint to resume from (default: the newest)")
		decision = fs.String("decision", "continue", "continue, rollback (to --checkpoint) or modify")
		changes = fs.String("modifications", "", `with modify: {"args": {"task": {...}}, "skip": ["task"]}`)
	}
	if err := parse(fs, args, want, want); err != nil {
		return err
	}
	rt, err := m.open(ctx, c, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(time.Minute)
	eng := rt.Workflows
	if eng == nil {
		return fmt.Errorf("workflows are kept in a database: %s keeps none", rt.DB)
	}
	if err := eng.ClaimDue(ctx); err != nil {
		return err
	}
	var w *workflow.Workflow
	switch sub {
	case "run":
		if w, err = m.startWorkflow(ctx, rt.Core, eng, fs.Arg(0), *session, *mode, *policy); err != nil {
			return err
		}
		m.follow(ctx, eng, w.ID, 0)
		return m.showWorkflow(ctx, eng, w.ID)
	case "status":
		if w, err = eng.Get(ctx, fs.Arg(0), principal); err != nil {
			return err
		}
		return m.showWorkflow(ctx, eng, w.ID)
	}
	cmd, err := m.workflowCommand(ctx, eng, sub, fs.Args(), reject, feedback, reason, checkpoint, decision, changes)
	if err != nil {
		return err
	}
	before, err := eng.Get(ctx, fs.Arg(0), principal)
	if err != nil {
		return err
	}
	if _, err := eng.Command(ctx, before.ID, principal, cmd); err != nil {
		return err
	}
	m.follow(ctx, eng, before.ID, before.Seq)
	return m.showWorkflow(ctx, eng, before.ID)
}

// workflowValidate is `agentplane workflow validate [--config FILE] FILE`:
// every problem of a definition, with its line, against the
// configuration's tools.
func (m *Main) workflowValidate(ctx context.Context, args []string) error {
	fs := m.flags("workflow validate", "[--config FILE] FILE")
	c := m.commonFlags(fs, false)
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	file := fs.Arg(0)
	rt, err := m.open(ctx, c, plane.Options{Core: m.routing()})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	def, err := m.readWorkflow(rt.Core, file)
	var probs workflow.Problems
	switch {
	case errors.As(err, &probs):
		for _, p := range probs {
			fmt.Fprintln(m.Stdout, p)
		}
		fmt.Fprintf(m.Stdout, "%s: %d problem(s)\n", file, len(probs))
		return exitCode(1)
	case err != nil:
		fmt.Fprintf(m.Stdout, "%v\n", err)
		return exitCode(1)
	}
	layers, _ := def.Layers()
	fmt.Fprintf(m.Stdout, "%s: valid (%d tasks in %d layers)\n", file, len(def.Tasks), len(layers))
	return nil
}

// readWorkflow reads and checks a definition file against the core's
// tools.
func (m *Main) readWorkflow(c *core.Core, file string) (*workflow.Definition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	known := func(name string) bool { _, ok := c.View().Tool(name); return ok }
	return workflow.Parse(data, file, known)
}

// startWorkflow starts a definition file's workflow in a session.
func (m *Main) startWorkflow(ctx context.Context, c *core.Core, eng *workflow.Engine, file, session, mode, policy string) (*workflow.Workflow, error) {
	def, err := m.readWorkflow(c, file)
	if err != nil {
		return nil, err
	}
	if session == "" {
		if !c.ModeOK(mode) {
			return nil, fmt.Errorf("--mode %q: no such mode", mode)
		}
		s, err := c.Start(ctx, core.Start{Principal: agentplane.LocalPrincipal, Mode: mode})
		if err != nil {
			return nil, err
		}
		session = s.ID
		fmt.Fprintf(m.Stdout, "session %s\n", session)
	}
	w, err := eng.Start(ctx, workflow.Start{SessionID: session, Principal: agentplane.LocalPrincipal, Definition: def, ResumePolicy: policy})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(m.Stdout, "workflow %s started\n", w.ID)
	return w, nil
}

// workflowCommand builds the command a subcommand sends.
func (m *Main) workflowCommand(ctx context.Context, eng *workflow.Engine, sub string, args []string, reject *bool, feedback, reason, checkpoint, decision, changes *string) (workflow.Command, error) {
	switch sub {
	case "continue":
		return workflow.Command{Type: workflow.CommandContinue}, nil
	case "abort":
		return workflow.Command{Type: workflow.CommandAbort, Reason: *reason}, nil
	case "approve":
		ok := !*reject
		return workflow.Command{Type: workflow.CommandApprovalResponse, CheckpointID: args[1], Approved: &ok, Feedback: *feedback}, nil
	}
	cmd := workflow.Command{Type: workflow.CommandCheckpointResponse, CheckpointID: *checkpoint, Decision: *decision}
	if cmd.CheckpointID == "" {
		w, err := eng.Get(ctx, args[0], agentplane.LocalPrincipal)
		if err != nil {
			return cmd, err
		}
		if w.Interruption == nil {
			return cmd, fmt.Errorf("workflow %s is %s, not interrupted: nothing to resume", w.ID, w.Status)
		}
		cmd.CheckpointID = w.Interruption.CheckpointID
	}
	if *changes != "" {
		cmd.Modifications = &workflow.Modifications{}
		dec := json.NewDecoder(strings.NewReader(*changes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cmd.Modifications); err != nil {
			return cmd, fmt.Errorf("--modifications: %v", err)
		}
	}
	return cmd, nil
}

// follow prints the workflow's events after a sequence number until it
// pauses or ends.
func (m *Main) follow(ctx context.Context, eng *workflow.Engine, id string, after int64) {
	ctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	defer func() { stop(); <-done }() // the waiter ends with follow
	from := after
	go func() {
		defer close(done)
		eng.Wait(ctx, id, agentplane.LocalPrincipal, from)
	}()
	for {
		changed := eng.Changes(id)
		raws, seqs, err := eng.Events(ctx, id, after, 256)
		if err != nil {
			return
		}
		for i, raw := range raws {
			after = seqs[i]
			var ev workflow.Event
			json.Unmarshal(raw, &ev)
			fmt.Fprintln(m.Stdout, describeEvent(ev))
		}
		if len(raws) > 0 {
			continue
		}
		select {
		case <-done:
			if raws, _, _ := eng.Events(ctx, id, after, 1); len(raws) == 0 {
				return
			}
		case <-changed:
		case <-time.After(eng.Poll()):
		case <-ctx.Done():
			return
		}
	}
}

// describeEvent is an event as one line.
func describeEvent(ev workflow.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4d %s", ev.Seq, ev.Type)
	if ev.Layer > 0 {
		fmt.Fprintf(&b, " layer %d", ev.Layer)
	}
	if ev.Task != "" {
		fmt.Fprintf(&b, " %s (%s)", ev.Task, ev.Tool)
	}
	if ev.CheckpointID != "" {
		fmt.Fprintf(&b, " %s", ev.CheckpointID)
	}
	if ev.Error != nil {
		fmt.Fprintf(&b, ": %s: %s", ev.Error.Code, ev.Error.Detail)
	}
	if ev.Reason != "" {
		fmt.Fprintf(&b, ": %s", ev.Reason)
	}
	return b.String()
}

// showWorkflow prints where a workflow stands and what it waits for; the
// exit status is 1 when it failed or was aborted.
func (m *Main) showWorkflow(ctx context.Context, eng *workflow.Engine, id string) error {
	w, err := eng.Get(ctx, id, agentplane.LocalPrincipal)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "workflow %s: %s after %d layer(s)\n", w.ID, w.Status, w.Layer)
	for _, t := range w.Tasks {
		line := fmt.Sprintf("  %-20s %-22s %s", t.ID, t.Tool, t.Status)
		if t.Error != nil {
			line += ": " + t.Error.Detail
		}
		fmt.Fprintln(m.Stdout, line)
	}
	switch {
	case w.Approval != nil:
		fmt.Fprintf(m.Stdout, "approval %s needed before layer %d:\n", w.Approval.CheckpointID, w.Approval.Layer)
		for _, call := range w.Approval.Tasks {
			fmt.Fprintf(m.Stdout, "  %s: %s %s (%s)\n", call.ID, call.Tool, call.Args, call.Impact)
		}
		fmt.Fprintf(m.Stdout, "answer: agentplane workflow approve [--reject] %s %s\n", w.ID, w.Approval.CheckpointID)
	case w.Decision != nil:
		fmt.Fprintf(m.Stdout, "decision needed after layer %d: agentplane workflow continue|abort %s\n", w.Decision.Layer, w.ID)
	case w.Interruption != nil:
		fmt.Fprintf(m.Stdout, "interrupted (in flight: %s); checkpoints %s\nanswer: agentplane workflow resume [--checkpoint ID] [--decision continue|rollback|modify] %s\n",
			strings.Join(w.Interruption.InFlight, ", "), strings.Join(w.Interruption.Checkpoints, ", "), w.ID)
	case w.Reason != "":
		fmt.Fprintf(m.Stdout, "reason: %s\n", w.Reason)
	}
	if w.Status == workflow.StatusFailed || w.Status == workflow.StatusAborted {
		return exitCode(1)
	}
	return nil
}
