package demo

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentplane/agentplane/tool"
)

// SendTemplateTool is the demo's send tool, declared in its
// configuration on the Program.
const SendTemplateTool = "send_template"

// Program is the name the demo configuration's send tool gives its
// implementation (tools[].program), which the agentplane binary ships.
const Program = "demo_outbox"

// Send is one email template sent to a mailer list.
type Send struct {
	ID         int       `json:"send_id"`
	TemplateID string    `json:"template_id"`
	ListID     string    `json:"list_id"`
	RequestID  string    `json:"request_id"`
	Time       time.Time `json:"time"`
}

// Outbox records the demo's sends. It stands in for a mail system: the
// send tool really changes something, and a retried request id changes
// nothing. Safe for concurrent use.
type Outbox struct {
	mu        sync.Mutex
	now       func() time.Time
	sends     []Send
	byRequest map[string]int
}

// NewOutbox returns an empty outbox; now nil means time.Now.
func NewOutbox(now func() time.Time) *Outbox {
	if now == nil {
		now = time.Now
	}
	return &Outbox{now: now, byRequest: map[string]int{}}
}

// Sends returns the sends so far, oldest first.
func (o *Outbox) Sends() []Send {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Send(nil), o.sends...)
}

// Programs returns the outbox's send as the Program that sends the
// session's active email template to the list in its arguments.
func (o *Outbox) Programs() map[string]tool.Program {
	return map[string]tool.Program{Program: o.send}
}

func (o *Outbox) send(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var in struct {
		ListID string `json:"list_id"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.ListID == "" {
		return nil, tool.Errorf("bad_args", "list_id is required")
	}
	ci, _ := tool.CallInfoFrom(ctx)
	awc := ci.Context.ActiveWorkContext
	if awc.Entity == nil || awc.EntityType != "email_template" {
		return nil, tool.Errorf("no_template", "no email template is active; open one first")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err // the gate gave up on this call: send nothing
	}
	if i, seen := o.byRequest[ci.Key()]; seen && ci.Key() != "" {
		return json.Marshal(o.sends[i]) // a retry: the send happened once
	}
	s := Send{ID: len(o.sends) + 1, TemplateID: awc.Entity.ID, ListID: in.ListID, RequestID: ci.Key(), Time: o.now().UTC()}
	o.sends = append(o.sends, s)
	if ci.Key() != "" {
		o.byRequest[ci.Key()] = len(o.sends) - 1
	}
	return json.Marshal(s)
}

// Programs returns the demo's programs on a new outbox (clock now; nil
// means time.Now): what a program passes to the core
// (core.Options.Programs) with the demo configuration.
func Programs(now func() time.Time) map[string]tool.Program { return NewOutbox(now).Programs() }

// SendWith returns the demo's programs with fn in place of the outbox's
// send: a mail system that fails, hangs or counts, in tests.
func SendWith(fn tool.Program) map[string]tool.Program { return map[string]tool.Program{Program: fn} }
