// Package llm is agentplane's LLM connection: the one place a
// continue_with_llm turn becomes a conversation with an OpenAI-compatible
// model. The prompt is the mode's summary, the active work context with
// its related entities, the pending state and awareness lines; the history
// is read from the session's audit chain (bounded); the tools offered are
// exactly those active for the session's mode and the principal's roles.
// Every tool call the model makes runs through the gate with origin llm
// and its result (or rejection, with the code) goes back to the model. A
// call that needs the human's confirmation ends the turn with a question
// to the human — the token goes to the human's channel, never to the
// model. Every exchange is an audit record, so replay answers from the
// record and a session with LLM turns replays exactly.
//
//	a := llm.New(c, llm.NewOpenAI(settings, nil), settings.LLM)
//	reply, err := a.Turn(ctx, llm.TurnRequest{SessionID: id, Principal: "local", OnText: print})
package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/redact"
	"github.com/agentplane/agentplane/telemetry"
)

// Agent answers continue_with_llm turns. It is safe for concurrent use.
type Agent struct {
	core  Sessions
	model Model
	cfg   config.LLM
	opts  Options
}

// Options connect an Agent to what it is told besides the conversation.
// nil means none.
type Options struct {
	// Awareness, when set, returns lines for the prompt about what the
	// user has seen and what waits for them (the notifications' seam:
	// notify.Ledger.Awareness).
	Awareness func(ctx context.Context, sess *agentplane.Session) []string
	// Acknowledged, when set, is told the notification ids the model
	// acknowledged in its text ("[ack:ID]", taken out of the text the user
	// sees) for the turn's principal: the agent channel's delivery
	// (notify.Ledger.AgentAck).
	Acknowledged func(ctx context.Context, principal string, ids []string)
	// Tracer, when set, traces each call of the model as a chat span
	// (package telemetry: model, token usage, finish reasons); nil: no
	// tracing.
	Tracer trace.Tracer
	// CaptureContent adds the messages sent and received to chat spans
	// (gen_ai.input.messages, gen_ai.output.messages); off by default: what
	// people write stays out of traces unless asked for.
	CaptureContent bool
}

// ackPattern is how the model acknowledges a notification in its text.
var ackPattern = regexp.MustCompile(`\[ack:([0-9a-f]{1,64})\]`)

// Sessions is what the agent uses of the core (a *core.Core): the
// session and its chain to read, and the core's own writes of them — the
// exchanges with the model, the calls through the gate, the proposals —
// each on the configuration in force. The agent reaches no gate, store or
// tool. The methods are safe for concurrent use.
type Sessions interface {
	Session(ctx context.Context, id string) (*agentplane.Session, error)
	Records(ctx context.Context, session string, after int64) ([]audit.Record, error)
	Tail(ctx context.Context, session string, turns int) ([]audit.Record, error)
	RecordExchange(ctx context.Context, sessionID, principal string, roles []string, ex *agentplane.LLMExchange) (int64, error)
	Execute(ctx context.Context, inv gate.Invocation) (agentplane.ExecutionResult, error)
	Propose(ctx context.Context, p core.Proposal) (gate.Decided, error)
	// View is the configuration in force: the mode's prompt and the tools
	// offered come from one.
	View() core.View
	// Redactor masks the server's secrets in what the model's endpoint
	// said.
	Redactor() *redact.Redactor
}

// New returns the agent of a core (the sessions) and a model with the
// configured limits.
func New(c Sessions, m Model, cfg config.LLM, opts *Options) *Agent {
	if cfg.MaxToolRounds <= 0 {
		cfg.MaxToolRounds = config.DefaultMaxToolRounds
	}
	if cfg.MaxHistoryTurns <= 0 {
		cfg.MaxHistoryTurns = config.DefaultMaxHistoryTurns
	}
	a := &Agent{core: c, model: m, cfg: cfg}
	if opts != nil {
		a.opts = *opts
	}
	return a
}

// TurnRequest asks for one LLM turn of a session, after a turn the router
// handed to the LLM.
type TurnRequest struct {
	SessionID string
	Principal string
	Roles     []string
	// OnText gets the model's text as it streams; nil ignores it.
	OnText func(delta string)
	// Task, when set, makes this an internal turn: the agent handles a
	// notification on its own — Task is what it is told (the last
	// message), nothing is shown to the user, its calls run with origin
	// agent_internal (read and internal tools run; one that changes the
	// world needs the human: Reply.Question), and its exchanges are not
	// part of the conversation's history.
	Task string
}

// Reply is what an LLM turn produced.
type Reply struct {
	Text  string                       // the model's text, all rounds
	Calls []agentplane.ExecutionResult // the results of its tool calls, in order
	// Question and ConfirmationToken: a tool call of the model needs the
	// human's confirmation; the question is for the human, the token for
	// a confirm button (the human's channel only). "yes" also confirms.
	Question          string
	ConfirmationToken string
	// Failure says why the model gave no answer (after its retries);
	// nothing changed and the failure is in the audit log.
	Failure string
	Rounds  int
}

// Turn runs the model until it answers without tool calls, a call needs
// the human's confirmation, or the configured rounds are used up. The
// error is for a store that failed; the model's failures are in Reply.
func (a *Agent) Turn(ctx context.Context, r TurnRequest) (Reply, error) {
	var reply Reply
	var recs []audit.Record              // the chain so far: each round reads only what is new
	var internal []agentplane.LLMMessage // an internal turn's own conversation: the task, the answers, the results
	for reply.Rounds < a.cfg.MaxToolRounds {
		reply.Rounds++
		sess, err := a.core.Session(ctx, r.SessionID)
		if err != nil {
			return reply, err
		}
		var newer []audit.Record
		if len(recs) == 0 { // the history's window, read from the end
			newer, err = a.core.Tail(ctx, r.SessionID, a.cfg.MaxHistoryTurns)
		} else {
			newer, err = a.core.Records(ctx, r.SessionID, recs[len(recs)-1].Seq)
		}
		if err != nil {
			return reply, err
		}
		recs = append(recs, newer...)
		req, names := a.request(ctx, sess, recs, r.Roles)
		if r.Task != "" { // the conversation so far, then the internal turn's own
			if len(internal) == 0 {
				internal = []agentplane.LLMMessage{{Role: "user", Content: r.Task}}
			}
			req.Messages = append(req.Messages, internal...)
		}
		onText := r.OnText
		if r.Task != "" {
			onText = nil // nothing of an internal turn is shown
		}
		resp, attempts, err := a.complete(ctx, req, onText)
		ex := &agentplane.LLMExchange{Model: a.model.Name(), Tools: names, Aware: req.Aware, Attempts: attempts, Internal: r.Task != ""}
		compact(ex, req.Messages, req.History, recs)
		red := a.core.Redactor() // what the endpoint said may hold a secret (its key, echoed)
		if err != nil {
			err = errors.New(red.String(err.Error()))
			ex.Error = err.Error()
		} else {
			resp.Text = red.String(resp.Text)
			ex.Response = &resp
		}
		seq, rerr := a.core.RecordExchange(ctx, r.SessionID, r.Principal, r.Roles, ex)
		if rerr != nil {
			return reply, rerr
		}
		if err != nil {
			reply.Failure = "The LLM did not answer: " + err.Error()
			return reply, nil
		}
		text, acked := acknowledgements(resp.Text)
		reply.Text += text
		if len(acked) > 0 && a.opts.Acknowledged != nil {
			a.opts.Acknowledged(ctx, r.Principal, acked)
		}
		if len(resp.ToolCalls) == 0 {
			return reply, nil
		}
		if r.Task != "" {
			internal = append(internal, agentplane.LLMMessage{Role: "assistant", Content: resp.Text, ToolCalls: resp.ToolCalls})
		}
		for i, call := range resp.ToolCalls {
			res, err := a.call(ctx, r, seq, i, call)
			if err != nil {
				return reply, err
			}
			if r.Task != "" {
				internal = append(internal, agentplane.LLMMessage{Role: "tool", ToolCallID: call.ID, Content: ToolResult(&res)})
			}
			if res.Status == agentplane.StatusConfirmationRequired && reply.Question == "" {
				d, err := a.propose(ctx, r, call, res)
				if err != nil {
					return reply, err
				}
				reply.Question, reply.ConfirmationToken = res.Message, d.ConfirmationToken
			}
			reply.Calls = append(reply.Calls, res)
		}
		if reply.Question != "" {
			return reply, nil // the human answers first
		}
	}
	reply.Failure = fmt.Sprintf("The LLM was still calling tools after %d rounds; its turn was stopped there.", a.cfg.MaxToolRounds)
	return reply, nil
}

// call runs one tool call through the gate with origin llm. Its request
// id names the exchange and the call, so the history pairs the result
// with the call and a retried call runs once.
func (a *Agent) call(ctx context.Context, r TurnRequest, seq int64, i int, call agentplane.LLMToolCall) (agentplane.ExecutionResult, error) {
	args := json.RawMessage(call.Arguments)
	if !json.Valid(args) {
		// not JSON: passed as the JSON string of what the model wrote, so
		// the gate's refusal quotes it and the record (and replay) keeps it
		args, _ = json.Marshal(call.Arguments)
	}
	origin := gate.OriginLLM
	if r.Task != "" {
		origin = gate.OriginAgentInternal
	}
	return a.core.Execute(ctx, gate.Invocation{SessionID: r.SessionID, Tool: call.Name, Args: args,
		Origin: origin, Principal: r.Principal, Roles: r.Roles, RequestID: callID(seq, i)})
}

// propose makes a call that needs confirmation the session's pending
// confirmation, with the token for the human.
func (a *Agent) propose(ctx context.Context, r TurnRequest, call agentplane.LLMToolCall, res agentplane.ExecutionResult) (gate.Decided, error) {
	sess, err := a.core.Session(ctx, r.SessionID)
	if err != nil {
		return gate.Decided{}, err
	}
	d, err := a.core.Propose(ctx, core.Proposal{Base: sess, Principal: r.Principal, Tool: call.Name, Args: json.RawMessage(call.Arguments), Question: res.Message})
	if agentplane.ErrorCode(err) == agentplane.CodeInvalidArgs {
		return gate.Decided{}, fmt.Errorf("llm: the proposed call passed the gate but not its schema: %w", err)
	}
	return d, err
}

// acknowledgements takes the "[ack:ID]" marks out of a text and returns
// the text without them and the ids.
func acknowledgements(text string) (string, []string) {
	var ids []string
	for _, m := range ackPattern.FindAllStringSubmatch(text, -1) {
		ids = append(ids, m[1])
	}
	if ids == nil {
		return text, nil
	}
	return strings.TrimSpace(ackPattern.ReplaceAllString(text, "")), ids
}

// callID is the request id of the i-th tool call of the exchange recorded
// at seq.
func callID(seq int64, i int) string { return fmt.Sprintf("llm-%d-%d", seq, i) }

// parseCallID reads a request id callID made.
func parseCallID(id string) (seq int64, i int, ok bool) {
	rest, found := strings.CutPrefix(id, "llm-")
	s, n, cut := strings.Cut(rest, "-")
	if !found || !cut {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseInt(s, 10, 64)
	i, err2 := strconv.Atoi(n)
	return seq, i, err1 == nil && err2 == nil
}

// Request builds what the model is sent for the session now: the system
// prompt, the history from the audit chain, and the active tools (their
// names too, for the record). Replay builds it again to compare.
func (a *Agent) Request(ctx context.Context, sess *agentplane.Session, roles []string) (Request, []string, error) {
	recs, err := a.core.Tail(ctx, sess.ID, a.cfg.MaxHistoryTurns)
	if err != nil {
		return Request{}, nil, err
	}
	req, names := a.request(ctx, sess, recs, roles)
	return req, names, nil
}

// request builds the request from the session's chain.
func (a *Agent) request(ctx context.Context, sess *agentplane.Session, recs []audit.Record, roles []string) (Request, []string) {
	var aware []string
	if a.opts.Awareness != nil {
		aware = a.opts.Awareness(ctx, sess)
	}
	history := History(recs, a.cfg.MaxHistoryTurns)
	v := a.core.View() // the prompt and the tools offered under one configuration
	msgs := append([]agentplane.LLMMessage{{Role: "system", Content: a.systemPrompt(v, sess, aware)}}, history...)
	var tools []map[string]any
	var names []string
	for _, t := range v.ActiveTools(sess.Mode, roles) {
		tools = append(tools, t.Spec.OpenAIFunction())
		names = append(names, t.Spec.Name)
	}
	return Request{Messages: msgs, History: len(history), Tools: tools, Temperature: a.cfg.Temperature, Aware: aware}, names
}

// compact fills the exchange's messages from the messages sent, whose
// history (the hist messages after the system prompt, built from recs)
// the chain holds already: the system prompt and what followed the
// history are kept, the history is counted, and every message sent is
// digested.
func compact(ex *agentplane.LLMExchange, sent []agentplane.LLMMessage, hist int, recs []audit.Record) {
	ex.Digest = Digest(sent)
	if hist == 0 || len(sent) < 1+hist {
		ex.Messages = sent
		return
	}
	ex.Messages = append(append(make([]agentplane.LLMMessage, 0, len(sent)-hist), sent[0]), sent[1+hist:]...)
	ex.HistoryMessages = hist
	if len(recs) > 0 {
		ex.HistoryFrom = recs[0].Seq
	}
}

// Digest is the SHA-256 of messages as JSON, in hex.
func Digest(msgs []agentplane.LLMMessage) string {
	b, _ := json.Marshal(msgs) // plain strings and slices: it cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Sent returns the messages an exchange recorded as sent, with history
// the history Request builds again for it (the caller's): what was
// sent when the exchange left its history out.
func Sent(ex *agentplane.LLMExchange, history []agentplane.LLMMessage) []agentplane.LLMMessage {
	if ex.HistoryMessages == 0 || len(ex.Messages) == 0 {
		return ex.Messages
	}
	return append(append(append(make([]agentplane.LLMMessage, 0, len(ex.Messages)+len(history)), ex.Messages[0]), history...), ex.Messages[1:]...)
}

// systemPrompt is the mode's summary, the active work context and its
// related entities, the pending state, the awareness lines and the rules.
func (a *Agent) systemPrompt(v core.View, sess *agentplane.Session, awareness []string) string {
	var b strings.Builder
	if m, ok := v.Registry().Mode(sess.Mode); ok {
		fmt.Fprintf(&b, "Mode: %s (%s). %s\n", m.DisplayName, m.Key, m.SystemPromptSummary)
	}
	awc := sess.AWC
	if awc.Entity != nil {
		fmt.Fprintf(&b, "Active work context: %s %q (id %s).\n", awc.EntityType, awc.Entity.DisplayName, awc.Entity.ID)
		for _, rel := range awc.RelatedEntities {
			fmt.Fprintf(&b, "Related: %s %s %q (id %s).\n", rel.Role, rel.EntityType, rel.Header.DisplayName, rel.Header.ID)
		}
	} else {
		b.WriteString("Nothing is active.\n")
	}
	if pc := sess.PendingConfirmation; pc != nil {
		fmt.Fprintf(&b, "Waiting for the user's confirmation: %q. Only the user can confirm it.\n", pc.Question)
	}
	if pp := sess.PendingPicker; pp != nil {
		fmt.Fprintf(&b, "The user has a list open to pick from (%s).\n", pp.Source)
	}
	for _, line := range awareness {
		b.WriteString(line + "\n")
	}
	b.WriteString("Use only the tools offered. Never invent ids: find them with catalog_search. " +
		"An action that changes the world may need the user's confirmation: agentplane asks the user; you cannot confirm it, and saying yes does nothing.")
	return b.String()
}

// History is the conversation the audit chain records, as chat messages,
// from the last maxTurns user turns: each turn's text; what agentplane
// answered a turn it handled itself; the model's answers and tool calls;
// each call's result. A call whose result is not in the chain is answered
// "not run", so every call has its result.
func History(recs []audit.Record, maxTurns int) []agentplane.LLMMessage {
	start, turns := 0, 0
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Kind == audit.KindTurn {
			if turns++; turns == maxTurns {
				start = i
				break
			}
		}
	}
	var msgs []agentplane.LLMMessage
	calls := map[int64][]agentplane.LLMToolCall{} // exchange seq -> its calls
	var open []string                             // call ids awaiting a result
	settle := func() {
		for _, id := range open {
			msgs = append(msgs, agentplane.LLMMessage{Role: "tool", ToolCallID: id, Content: `{"status":"rejected","message":"not run"}`})
		}
		open = nil
	}
	for _, r := range recs[start:] {
		switch r.Kind {
		case audit.KindTurn:
			settle()
			if r.Input != nil {
				msgs = append(msgs, agentplane.LLMMessage{Role: "user", Content: userText(r.Input)})
			}
			if d := r.Decision; d != nil && d.Action != agentplane.ActionContinueLLM {
				msgs = append(msgs, agentplane.LLMMessage{Role: "assistant", Content: handled(d, r.Result)})
			}
		case audit.KindNotice:
			settle()
			if n := r.Notice; n != nil {
				msgs = append(msgs, agentplane.LLMMessage{Role: "user", Content: fmt.Sprintf("[notification shown to the user] %s %s", n.Title, n.Body)})
			}
		case audit.KindLLM:
			settle()
			if r.LLM == nil || r.LLM.Response == nil || r.LLM.Internal {
				continue // no answer, or an internal turn's (not the conversation's)
			}
			resp := r.LLM.Response
			msgs = append(msgs, agentplane.LLMMessage{Role: "assistant", Content: resp.Text, ToolCalls: resp.ToolCalls})
			calls[r.Seq] = resp.ToolCalls
			for _, c := range resp.ToolCalls {
				open = append(open, c.ID)
			}
		case audit.KindExecution:
			if r.Intent == nil || r.Intent.Origin != string(gate.OriginLLM) || r.Result == nil {
				continue
			}
			seq, i, ok := parseCallID(r.Intent.RequestID)
			if !ok || i >= len(calls[seq]) {
				continue
			}
			id := calls[seq][i].ID
			for k, o := range open {
				if o == id {
					open = append(open[:k], open[k+1:]...)
					msgs = append(msgs, agentplane.LLMMessage{Role: "tool", ToolCallID: id, Content: ToolResult(r.Result)})
					break
				}
			}
		}
	}
	settle()
	return msgs
}

// userText is a turn's input as the model reads it.
func userText(in *agentplane.TurnInput) string {
	if in.Selection != nil && in.Text == "" {
		return fmt.Sprintf("[picked %s for %s]", in.Selection.ID, in.Selection.CommandID)
	}
	return in.Text
}

// handled says what agentplane did with a turn it did not hand over.
func handled(d *agentplane.Decision, res *agentplane.ExecutionResult) string {
	switch {
	case res != nil:
		return "[agentplane] " + res.Message
	case d.Action == agentplane.ActionAskQuestion:
		return "[agentplane asked] " + d.QuestionText
	case d.Action == agentplane.ActionOpenPicker:
		return fmt.Sprintf("[agentplane opened a list to pick from for %s]", d.CommandID)
	}
	return "[agentplane] " + string(d.Action)
}

// ToolResult is a gate result as the model reads it: status, message,
// error code and the tool's output — never a token.
func ToolResult(res *agentplane.ExecutionResult) string {
	out := struct {
		Status  agentplane.Status       `json:"status"`
		Message string                  `json:"message"`
		Error   *agentplane.ResultError `json:"error,omitempty"`
		Output  json.RawMessage         `json:"output,omitempty"`
	}{res.Status, res.Message, res.Error, res.Output}
	if res.Status == agentplane.StatusConfirmationRequired {
		out.Message = "Not run: the user must confirm this first; agentplane has asked them. Do not ask again or claim it is done."
	}
	raw, _ := json.Marshal(out)
	return string(raw)
}

// Script is a Model that answers with scripted responses, in order, and
// keeps the requests it was sent: conversation tests script the LLM with
// it. With no response left it fails.
type Script struct {
	Replies  []agentplane.LLMResponse
	Requests []Request
}

// Complete returns the next scripted response, streaming its text.
func (s *Script) Complete(_ context.Context, req Request, onText func(string)) (agentplane.LLMResponse, int, error) {
	s.Requests = append(s.Requests, req)
	if len(s.Replies) == 0 {
		return agentplane.LLMResponse{}, 1, fmt.Errorf("the script has no reply left for this request")
	}
	r := s.Replies[0]
	s.Replies = s.Replies[1:]
	if onText != nil && r.Text != "" {
		onText(r.Text)
	}
	if r.FinishReason == "" {
		r.FinishReason = "stop"
		if len(r.ToolCalls) > 0 {
			r.FinishReason = "tool_calls"
		}
	}
	return r, 1, nil
}

// Name returns "script".
func (s *Script) Name() string { return "script" }

// complete calls the model, in a chat span when tracing.
func (a *Agent) complete(ctx context.Context, req Request, onText func(string)) (agentplane.LLMResponse, int, error) {
	if a.opts.Tracer == nil {
		return a.model.Complete(ctx, req, onText)
	}
	model := a.model.Name()
	ctx, span := a.opts.Tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.GenAIOperationNameChat, semconv.GenAIProviderNameOpenAI, semconv.GenAIRequestModel(model)))
	defer span.End()
	if req.Temperature != nil {
		span.SetAttributes(semconv.GenAIRequestTemperature(*req.Temperature))
	}
	if a.opts.CaptureContent {
		if b, err := json.Marshal(req.Messages); err == nil {
			span.SetAttributes(semconv.GenAIInputMessagesKey.String(string(b)))
		}
	}
	resp, attempts, err := a.model.Complete(ctx, req, onText)
	span.SetAttributes(attribute.Int("agentplane.llm.attempts", attempts))
	if err != nil {
		telemetry.Fail(span, "llm_error", a.core.Redactor().String(err.Error()))
		return resp, attempts, err
	}
	span.SetAttributes(semconv.GenAIResponseModel(model), semconv.GenAIUsageInputTokens(int(resp.Usage.PromptTokens)),
		semconv.GenAIUsageOutputTokens(int(resp.Usage.CompletionTokens)))
	if resp.FinishReason != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(resp.FinishReason))
	}
	if a.opts.CaptureContent {
		if b, err := json.Marshal(resp); err == nil {
			span.SetAttributes(semconv.GenAIOutputMessagesKey.String(string(b)))
		}
	}
	return resp, attempts, nil
}
