package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/replay"
)

type env struct {
	t      *testing.T
	core   *core.Core
	outbox *demo.Outbox
	llm    *llmtest.Server
	agent  *llm.Agent
	id     string
}

func newEnv(t *testing.T, mode string, timeout time.Duration, script ...llmtest.Reply) *env {
	t.Helper()
	out := demo.NewOutbox(nil)
	c := demotest.Core(t, &core.Options{Programs: out.Programs()})
	srv := llmtest.New(t, script...)
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	s := llm.Settings{LLM: config.LLM{BaseURL: srv.URL, Model: "test-model", Timeout: timeout, MaxToolRounds: 4, MaxHistoryTurns: 10}}
	a := llm.New(c, llm.NewOpenAI(s, nil), s.LLM, nil)
	sess, err := c.Start(context.Background(), core.Start{Mode: mode, Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, core: c, outbox: out, llm: srv, agent: a, id: sess.ID}
}

// turn takes a user turn and, when the router hands it to the LLM, the
// LLM turn.
func (e *env) turn(text string) (core.Turn, llm.Reply) {
	e.t.Helper()
	ctx := context.Background()
	t, err := e.core.Turn(ctx, core.TurnRequest{SessionID: e.id, Principal: "p", Input: agentplane.TurnInput{Text: text}})
	if err != nil {
		e.t.Fatal(err)
	}
	if t.Decision.Action != agentplane.ActionContinueLLM {
		return t, llm.Reply{}
	}
	r, err := e.agent.Turn(ctx, llm.TurnRequest{SessionID: e.id, Principal: "p"})
	if err != nil {
		e.t.Fatal(err)
	}
	return t, r
}

// replay replays the session's audit chain on a core and returns the
// divergences it printed.
func (e *env) replay(c *core.Core) string {
	e.t.Helper()
	recs, err := e.core.Records(context.Background(), e.id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var log, out bytes.Buffer
	for _, r := range recs {
		log.Write(r.Raw)
		log.WriteByte('\n')
	}
	n, err := replay.Run(context.Background(), c, &log, &out, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if n != strings.Count(out.String(), "differs") {
		e.t.Fatalf("%d divergences, printed:\n%s", n, out.String())
	}
	return out.String()
}

// replaysExactly checks the session replays with no divergence.
func (e *env) replaysExactly() {
	e.t.Helper()
	if out := e.replay(e.core); out != "" {
		e.t.Fatalf("replay diverged:\n%s", out)
	}
}

func (e *env) session() *agentplane.Session {
	s, err := e.core.Session(context.Background(), e.id)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// messages returns the messages of the n-th request the endpoint got.
func (e *env) messages(n int) []map[string]any {
	var out []map[string]any
	for _, m := range e.llm.Requests()[n]["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

func offered(req map[string]any) []string {
	var names []string
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		names = append(names, t.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	return names
}

// Flow C: the model gets the active work context and its related entity
// in the prompt, exactly the active tools, and answers with text.
func TestFlowC(t *testing.T) {
	e := newEnv(t, "", 0, llmtest.Reply{Text: "Dear CFO, here is a tighter draft."})
	e.turn("open the Q1 CFO Outreach template")
	turn, reply := e.turn("rewrite this template for the CFO persona")
	if turn.Decision.Action != agentplane.ActionContinueLLM || reply.Text != "Dear CFO, here is a tighter draft." || reply.Failure != "" {
		t.Fatalf("%+v %+v", turn.Decision, reply)
	}
	msgs := e.messages(0)
	system := msgs[0]["content"].(string)
	for _, want := range []string{"Mode: General", "Q1 CFO Outreach", "TPL-123", "audience persona \"CFO - MidMarket\""} {
		if !strings.Contains(system, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, system)
		}
	}
	last := msgs[len(msgs)-1]
	if last["role"] != "user" || last["content"] != "rewrite this template for the CFO persona" {
		t.Fatalf("last message %v", last)
	}
	var active []string
	for _, ti := range e.core.ActiveTools("general", nil) {
		active = append(active, ti.Spec.Name)
	}
	slices.Sort(active)
	if got := offered(e.llm.Requests()[0]); !slices.Equal(got, active) {
		t.Fatalf("offered %v, active %v", got, active)
	}
	// the exchange is in the audit log, with usage
	recs, _ := e.core.Records(context.Background(), e.id, 0)
	ex := recs[len(recs)-1]
	if ex.Kind != audit.KindLLM || ex.LLM.Response.Text != reply.Text || ex.LLM.Response.Usage.TotalTokens != 49 || ex.LLM.Model != "test-model" {
		t.Fatalf("%+v", ex)
	}
	e.replaysExactly()
}

// An external action the model proposes is asked of the human; the token
// never reaches the model; the human's yes runs it once; the model's
// calling again runs nothing.
func TestProposedActionNeedsTheHuman(t *testing.T) {
	send := llmtest.Call{Name: demo.SendTemplateTool, Arguments: `{"list_id": "LIST-9"}`}
	e := newEnv(t, "sales", 0,
		llmtest.Reply{Text: "I'll send it.", ToolCalls: []llmtest.Call{send}},
		llmtest.Reply{Text: "yes", ToolCalls: []llmtest.Call{send}}, // the model "confirms" itself
		llmtest.Reply{Text: "Done already."},
	)
	e.turn("open the Q1 CFO Outreach template")
	_, reply := e.turn("please mail this to the pilot group")
	if reply.Question == "" || reply.ConfirmationToken == "" || len(reply.Calls) != 1 || reply.Calls[0].Status != agentplane.StatusConfirmationRequired {
		t.Fatalf("%+v", reply)
	}
	if n := len(e.outbox.Sends()); n != 0 {
		t.Fatalf("%d sends before the human confirmed", n)
	}
	pc := e.session().PendingConfirmation
	if pc == nil || pc.Tool != demo.SendTemplateTool || string(pc.Args) != `{"list_id":"LIST-9"}` {
		t.Fatalf("pending %+v", pc)
	}
	// the model's own yes confirms nothing
	_, again := e.turn("go on")
	if len(again.Calls) != 1 || again.Calls[0].Status != agentplane.StatusConfirmationRequired || len(e.outbox.Sends()) != 0 {
		t.Fatalf("the model confirmed: %+v, %d sends", again, len(e.outbox.Sends()))
	}
	// the human's yes runs exactly that call, once
	yes, _ := e.turn("yes")
	if yes.Decision.Tool != demo.SendTemplateTool || yes.Result == nil || yes.Result.Status != agentplane.StatusSuccess || len(e.outbox.Sends()) != 1 {
		t.Fatalf("%+v %+v", yes.Decision, yes.Result)
	}
	second, _ := e.turn("yes")
	if second.Result != nil && second.Result.Status == agentplane.StatusSuccess || len(e.outbox.Sends()) != 1 {
		t.Fatalf("a second yes ran it again: %+v %+v, %d sends", second.Decision, second.Result, len(e.outbox.Sends()))
	}
	// no token ever went to the model
	for i, raw := range e.llm.Raw() {
		for _, tok := range []string{reply.ConfirmationToken, again.ConfirmationToken, "tok-"} {
			if tok != "" && strings.Contains(string(raw), tok) {
				t.Fatalf("request %d carries a token %q", i, tok)
			}
		}
	}
	// the tool message told the model the user must confirm
	if msgs := e.messages(1); msgs[len(msgs)-2]["role"] != "tool" || !strings.Contains(msgs[len(msgs)-2]["content"].(string), "the user must confirm") {
		t.Fatalf("%v", msgs[len(msgs)-2])
	}
	e.replaysExactly()
	// against a configuration where the send tool is gone: what changes
	changed := demotest.WithYAML(t, []byte(strings.Replace(string(demo.YAML), "tools: [send_template]", "tools: []", 1)),
		&core.Options{Programs: demo.Programs(nil)})
	out := e.replay(changed)
	for _, want := range []string{"llm tools offered differs", "result differs", `"inactive_action"`} {
		if !strings.Contains(out, want) {
			t.Errorf("replay on the changed configuration does not say %q:\n%s", want, out)
		}
	}
}

// An invented id is rejected with the reason; the model searches and
// succeeds.
func TestInventedIDIsRejectedThenFound(t *testing.T) {
	e := newEnv(t, "", 0,
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "agent_set_active_entity", Arguments: `{"catalog_id":"email_templates","id":"TPL-999"}`}}},
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "catalog_search", Arguments: `{"catalog_id":"email_templates","query":"renewal"}`}}},
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "agent_set_active_entity", Arguments: `{"catalog_id":"email_templates","id":"TPL-200"}`}}},
		llmtest.Reply{Text: "Renewal Reminder is open."},
	)
	_, reply := e.turn("work on the renewal mail please")
	if reply.Text != "Renewal Reminder is open." || len(reply.Calls) != 3 || reply.Rounds != 4 {
		t.Fatalf("%+v", reply)
	}
	if c := reply.Calls[0]; c.Status != agentplane.StatusRejected || c.Error.Code != agentplane.CodeInvalidArgs || !strings.Contains(c.Message, "TPL-999") {
		t.Fatalf("%+v", c)
	}
	if msgs := e.messages(1); !strings.Contains(msgs[len(msgs)-1]["content"].(string), "invalid_args") {
		t.Fatalf("the model was not told why: %v", msgs[len(msgs)-1])
	}
	if awc := e.session().AWC; awc.Entity == nil || awc.Entity.ID != "TPL-200" {
		t.Fatalf("%+v", awc)
	}
	e.replaysExactly()
}

// A tool inactive in the mode is never offered and, called anyway, is
// rejected; a malformed call is rejected and fed back, never a crash.
func TestInactiveAndMalformedCalls(t *testing.T) {
	e := newEnv(t, "", 0, llmtest.Reply{ToolCalls: []llmtest.Call{
		{Name: demo.SendTemplateTool, Arguments: `{"list_id":"LIST-9"}`},
		{Name: "agent_set_mode", Arguments: `{"mode": `},
		{Name: "no_such_tool", Arguments: `{}`},
	}}, llmtest.Reply{Text: "sorry"})
	_, reply := e.turn("hello there")
	if slices.Contains(offered(e.llm.Requests()[0]), demo.SendTemplateTool) {
		t.Fatal("an inactive tool was offered")
	}
	codes := []string{}
	for _, c := range reply.Calls {
		codes = append(codes, c.Error.Code)
	}
	if !slices.Equal(codes, []string{agentplane.CodeInactiveAction, agentplane.CodeInvalidArgs, agentplane.CodeUnknownAction}) || reply.Text != "sorry" {
		t.Fatalf("%v %+v", codes, reply)
	}
	if len(e.outbox.Sends()) != 0 || e.session().Version != 1 {
		t.Fatal("something changed")
	}
	// every call got its result back, in order
	msgs := e.messages(1)
	var tools []string
	for _, m := range msgs {
		if m["role"] == "tool" {
			tools = append(tools, m["tool_call_id"].(string))
		}
	}
	if !slices.Equal(tools, []string{"call_0", "call_1", "call_2"}) {
		t.Fatalf("%v", tools)
	}
	e.replaysExactly()
}

// Failures: a cut stream and a 429 are tried again; a timeout, HTML, an
// empty or an oversized body end the turn with a clear message, recorded,
// with nothing changed.
func TestFailures(t *testing.T) {
	t.Run("CutStream", func(t *testing.T) {
		e := newEnv(t, "", 0, llmtest.Reply{Text: "a long answer that breaks", CutAfter: 2}, llmtest.Reply{Text: "whole"})
		_, reply := e.turn("hello there")
		if reply.Text != "whole" || reply.Failure != "" {
			t.Fatalf("%+v", reply)
		}
		e.replaysExactly()
	})
	t.Run("TooManyRequests", func(t *testing.T) {
		e := newEnv(t, "", 0, llmtest.Reply{Status: 429, Body: `{"error":{"message":"slow down"}}`}, llmtest.Reply{Text: "fine"})
		_, reply := e.turn("hello there")
		recs, _ := e.core.Records(context.Background(), e.id, 0)
		if reply.Text != "fine" || recs[len(recs)-1].LLM.Attempts != 2 {
			t.Fatalf("%+v, attempts %d", reply, recs[len(recs)-1].LLM.Attempts)
		}
		e.replaysExactly()
	})
	for name, c := range map[string]struct {
		replies []llmtest.Reply
		timeout time.Duration
		want    string
	}{
		"Timeout":    {[]llmtest.Reply{{Delay: time.Second}, {Delay: time.Second}, {Delay: time.Second}, {Delay: time.Second}}, 100 * time.Millisecond, "did not answer in time"},
		"ServerDown": {[]llmtest.Reply{{Status: 503, Body: `{"error":{"message":"overloaded"}}`}, {Status: 503, Body: `{"error":{"message":"overloaded"}}`}, {Status: 503, Body: `{"error":{"message":"overloaded"}}`}}, 0, "503"},
		"HTML":       {[]llmtest.Reply{{Body: "<html>login</html>"}}, 0, "no completion"},
		"Empty":      {[]llmtest.Reply{{Status: 200, Body: ""}}, 0, "no completion"},
		"Huge":       {[]llmtest.Reply{{Status: 200, Body: "data: " + strings.Repeat("x", 10<<20)}, {Status: 200, Body: "data: " + strings.Repeat("x", 10<<20)}}, 30 * time.Second, "over 8 MiB"},
		"BadKey":     {[]llmtest.Reply{{Status: 401, Body: `{"error":{"message":"invalid api key"}}`}}, 0, "401"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, "", c.timeout, c.replies...)
			_, reply := e.turn("hello there")
			if !strings.Contains(reply.Failure, c.want) || reply.Text != "" {
				t.Fatalf("failure %q, want %q", reply.Failure, c.want)
			}
			recs, _ := e.core.Records(context.Background(), e.id, 0)
			last := recs[len(recs)-1]
			if last.Kind != audit.KindLLM || last.LLM.Error == "" || e.session().Version != 1 {
				t.Fatalf("%+v", last)
			}
			e.replaysExactly()
		})
	}
}

// The history sent is bounded, and a call's result follows its call.
func TestHistory(t *testing.T) {
	e := newEnv(t, "", 0)
	for range 12 {
		e.llm.Add(llmtest.Reply{Text: "ok"})
	}
	for i := range 12 {
		e.turn("hello number " + string(rune('a'+i)))
	}
	msgs := e.messages(11)
	users := 0
	for _, m := range msgs {
		if m["role"] == "user" {
			users++
		}
	}
	if users != 10 || msgs[1]["content"] != "hello number c" {
		t.Fatalf("%d user messages, first %v", users, msgs[1])
	}
}

// Check reports an unreachable endpoint, an unknown model and a refused
// key clearly.
func TestCheck(t *testing.T) {
	srv := llmtest.New(t)
	for name, c := range map[string]struct {
		url, model, want string
	}{
		"OK":           {srv.URL, "test-model", ""},
		"UnknownModel": {srv.URL, "gpt-9", `does not serve model "gpt-9" (it serves test-model)`},
		"Unreachable":  {"http://127.0.0.1:1/v1", "m", "127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			m := llm.NewOpenAI(llm.Settings{LLM: config.LLM{BaseURL: c.url, Model: c.model, Timeout: 2 * time.Second}}, nil)
			err := m.Check(context.Background())
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("%v, want %q", err, c.want)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if _, ok, err := llm.FromEnv(nil, get); ok || err != nil {
		t.Fatal("configured from nothing")
	}
	env["AGENTPLANE_LLM_BASE_URL"], env["AGENTPLANE_LLM_MODEL"], env["OPENAI_API_KEY"] = "http://x/v1/", "m", "k1"
	s, ok, err := llm.FromEnv(nil, get)
	if !ok || err != nil || s.BaseURL != "http://x/v1" || s.Model != "m" || s.APIKey != "k1" || s.MaxToolRounds == 0 {
		t.Fatalf("%+v %v %v", s, ok, err)
	}
	cfg := &config.LLM{BaseURL: "http://y/v1", Model: "n", APIKeyEnv: "MY_KEY"}
	delete(env, "AGENTPLANE_LLM_BASE_URL")
	if _, _, err := llm.FromEnv(cfg, get); err == nil || !strings.Contains(err.Error(), "MY_KEY is not set") {
		t.Fatalf("%v", err)
	}
	env["MY_KEY"] = "k2"
	if s, _, _ := llm.FromEnv(cfg, get); s.APIKey != "k2" || s.Model != "m" || s.BaseURL != "http://y/v1" {
		t.Fatalf("%+v", s)
	}
	env["AGENTPLANE_LLM_API_KEY"] = "k3"
	if s, _, _ := llm.FromEnv(cfg, get); s.APIKey != "k3" {
		t.Fatalf("%+v", s)
	}
}

// TestHistoryFromTheTail: the history built from the chain's tail (the
// records from the last turns, read page by page from the end) is the
// history built from the whole chain, for windows smaller and larger
// than the session, with tool calls and their results inside the window
// and at its edge.
func TestHistoryFromTheTail(t *testing.T) {
	e := newEnv(t, "sales", 0)
	for i := range 40 {
		if i%3 == 0 { // a tool call and its result, then the answer
			e.llm.Add(llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "catalog_search", Arguments: `{"catalog_id":"mailer_lists","query":"pilot"}`}}},
				llmtest.Reply{Text: "found it"})
		} else {
			e.llm.Add(llmtest.Reply{Text: "ok"})
		}
		if i%7 == 0 {
			e.turn("open the Q1 CFO Outreach template") // handled by the router
		}
		e.turn("tell me more, number " + string(rune('a'+i%26)))
	}
	ctx := context.Background()
	all, err := e.core.Records(ctx, e.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 5, 10, 33, 46, 47, 200} {
		tail, err := e.core.Tail(ctx, e.id, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(tail) == 0 || tail[len(tail)-1].Seq != all[len(all)-1].Seq || n < 40 && len(tail) >= len(all) {
			t.Fatalf("tail of %d turns: %d of %d records", n, len(tail), len(all))
		}
		got, want := llm.History(tail, n), llm.History(all, n)
		if !slices.EqualFunc(got, want, func(a, b agentplane.LLMMessage) bool {
			return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && len(a.ToolCalls) == len(b.ToolCalls)
		}) {
			t.Fatalf("%d turns: the tail's history (%d messages) is not the chain's (%d)", n, len(got), len(want))
		}
	}
}

// TestExchangeRecordsDoNotRepeatTheConversation: an exchange record keeps
// the system prompt and leaves out the history the chain holds — its size
// does not grow with the conversation — and its digest is that of every
// message sent; replay rebuilds the request and checks it exactly, and
// says where a changed configuration makes it differ.
func TestExchangeRecordsDoNotRepeatTheConversation(t *testing.T) {
	e := newEnv(t, "sales", 0)
	for i := range 14 {
		if i == 5 {
			e.llm.Add(llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "catalog_search", Arguments: `{"catalog_id":"mailer_lists","query":"pilot"}`}}},
				llmtest.Reply{Text: "found it"})
		} else {
			e.llm.Add(llmtest.Reply{Text: "ok"})
		}
		e.turn("tell me more, part " + string(rune('a'+i)))
	}
	recs, err := e.core.Records(context.Background(), e.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	req := 0
	for i, r := range recs {
		if r.Kind != audit.KindLLM {
			continue
		}
		ex := r.LLM
		sent := len(e.messages(req))
		req++
		if len(ex.Messages) != 1 || ex.Messages[0].Role != "system" || 1+ex.HistoryMessages != sent || ex.HistoryFrom < 1 || ex.HistoryFrom > r.Seq {
			t.Fatalf("record %d: %d messages kept, %d history from %d; %d sent", r.Seq, len(ex.Messages), ex.HistoryMessages, ex.HistoryFrom, sent)
		}
		if d := llm.Digest(llm.Sent(ex, llm.History(recs[:i], 10))); d != ex.Digest {
			t.Fatalf("record %d: the history built again does not digest as recorded", r.Seq)
		}
		sizes = append(sizes, len(r.Raw))
	}
	if len(sizes) != 15 || sizes[len(sizes)-1] > sizes[0]+200 {
		t.Fatalf("exchange record sizes grew with the conversation: %v", sizes)
	}
	e.replaysExactly()
	changed := demotest.WithYAML(t, []byte(strings.Replace(string(demo.YAML), "never send without the user's confirmation", "never send anything", 1)),
		&core.Options{Programs: demo.Programs(nil)})
	out := e.replay(changed)
	for _, want := range []string{"llm system prompt differs", "llm messages (digest) differs"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay on a changed mode summary does not say %q:\n%s", want, out)
		}
	}
}

// TestAttemptsPerCall: concurrent calls of one model each count their own
// HTTP requests, retries included — the number the audit records. (One
// counter per model was shared by every session's calls, so a call
// counted its neighbours' requests.)
func TestAttemptsPerCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{} // prompt -> requests
	srv := llmtest.New(t)
	srv.Respond = func(req map[string]any) llmtest.Reply {
		msgs, _ := req["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		prompt, _ := last["content"].(string)
		mu.Lock()
		seen[prompt]++
		n := seen[prompt]
		mu.Unlock()
		if strings.HasPrefix(prompt, "flaky") && n == 1 {
			return llmtest.Reply{Status: 500, Body: `{"error":{"message":"try again"}}`}
		}
		return llmtest.Reply{Text: "fine", Delay: 20 * time.Millisecond}
	}
	m := llm.NewOpenAI(llm.Settings{LLM: config.LLM{BaseURL: srv.URL, Model: "test-model", Timeout: 5 * time.Second}}, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			prompt := fmt.Sprint("steady ", i)
			want := 1
			if i%4 == 0 {
				prompt, want = fmt.Sprint("flaky ", i), 2
			}
			_, attempts, err := m.Complete(context.Background(), llm.Request{Messages: []agentplane.LLMMessage{{Role: "user", Content: prompt}}}, nil)
			if err != nil || attempts != want {
				t.Errorf("%s: %d attempts, want %d (%v)", prompt, attempts, want, err)
			}
		})
	}
	wg.Wait()
}
