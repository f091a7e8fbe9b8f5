package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/gzipped"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/trigger"
)

// CreateSession is the body of POST /v1/sessions.
type CreateSession struct {
	Mode string `json:"mode,omitempty"`
	UI   bool   `json:"ui,omitempty"`
}

// SessionCreated answers POST /v1/sessions.
type SessionCreated struct {
	SessionID string                   `json:"session_id"`
	Snapshot  agentplane.StateSnapshot `json:"snapshot"`
}

// SessionList answers GET /v1/sessions.
type SessionList struct {
	Sessions   []SessionItem `json:"sessions"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// SessionItem is a listed session.
type SessionItem struct {
	SessionID string                   `json:"session_id"`
	CreatedAt time.Time                `json:"created_at"`
	Snapshot  agentplane.StateSnapshot `json:"snapshot"`
}

// TurnBody is the body of POST /v1/sessions/{id}/turns.
type TurnBody struct {
	Text      string                `json:"text,omitempty"`
	Selection *agentplane.Selection `json:"selection,omitempty"`
	UI        *bool                 `json:"ui,omitempty"` // the session's setting when absent
}

// TurnAnswer answers a turn: the router's decision, the result when a
// command ran, the state after, the confirmation token of a confirmation
// question (for the human's client), and the turn's event id.
type TurnAnswer struct {
	Decision          agentplane.Decision         `json:"decision"`
	Result            *agentplane.ExecutionResult `json:"result,omitempty"`
	Snapshot          agentplane.StateSnapshot    `json:"snapshot"`
	ConfirmationToken string                      `json:"confirmation_token,omitempty"`
	// ConfirmIntent, with a confirmation token, is the intent that
	// confirms exactly the invocation asked about: POST it to
	// /v1/sessions/{id}/intents when the person confirms.
	ConfirmIntent *agentplane.Intent `json:"confirm_intent,omitempty"`
	Seq           int64              `json:"seq"`
	Repeated      bool               `json:"repeated,omitempty"`
	// LLM is the LLM's turn, when the router handed the turn to it and an
	// LLM is configured.
	LLM *LLMAnswer `json:"llm,omitempty"`
}

// LLMAnswer is what the LLM's turn produced: its text, its tool calls'
// results, a question for the human with the confirm button's token, or
// why it gave no answer.
type LLMAnswer struct {
	Text              string                       `json:"text"`
	Calls             []agentplane.ExecutionResult `json:"calls"`
	Question          string                       `json:"question,omitempty"`
	ConfirmationToken string                       `json:"confirmation_token,omitempty"`
	ConfirmIntent     *agentplane.Intent           `json:"confirm_intent,omitempty"` // as TurnAnswer's
	Failure           string                       `json:"failure,omitempty"`
	Snapshot          agentplane.StateSnapshot     `json:"snapshot"`
}

// idempotencyKey reads the Idempotency-Key header: 1 to 255 visible
// ASCII characters, or absent.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	return k, checkRequestID("Idempotency-Key", k)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var body CreateSession
	if err := decode(r, &body, true); err != nil {
		return err
	}
	if !s.core.ModeOK(body.Mode) {
		return invalid("field \"mode\": unknown mode %q (GET /v1/modes lists them)", truncate(body.Mode, 100))
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	start := core.Start{Mode: body.Mode, Principal: p.ID, UI: body.UI}
	var sess *agentplane.Session
	if key != "" {
		sess, _, err = s.core.StartOnce(r.Context(), start, key)
	} else {
		sess, err = s.core.Start(r.Context(), start)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, SessionCreated{SessionID: sess.ID, Snapshot: sess.Snapshot(s.core.Now())})
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := limitParam(r, 0, store.MaxSessionLimit)
	if err != nil {
		return err
	}
	q := store.SessionQuery{Owner: p.ID, Cursor: r.URL.Query().Get("cursor"), Limit: limit}
	page, err := s.core.Sessions(r.Context(), q)
	if err != nil {
		return err
	}
	now := s.core.Now()
	out := SessionList{Sessions: []SessionItem{}, NextCursor: page.Next}
	for _, info := range page.Sessions {
		out.Sessions = append(out.Sessions, SessionItem{SessionID: info.Session.ID, CreatedAt: info.Created, Snapshot: info.Session.Snapshot(now)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// owned returns the principal's session named in the path.
func (s *Server) owned(r *http.Request, p auth.Principal) (*agentplane.Session, error) {
	id := r.PathValue("id")
	if len(id) > 128 {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", truncate(id, 40))
	}
	return s.core.Owned(r.Context(), id, p.ID)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess.Snapshot(s.core.Now()))
	return nil
}

// Resumed answers POST /v1/sessions/{id}/resume: the session's state,
// fitted to the configuration, and what was changed to fit it.
type Resumed struct {
	Snapshot agentplane.StateSnapshot `json:"snapshot"`
	// Notes say, for the person, what was changed (a mode that is gone
	// replaced by the default, a pending question dropped); empty when the
	// session fit. The resume record's event carries them too.
	Notes []string `json:"notes"`
}

// postResume opens a stored session to continue it, as chat --session
// does: fitted to the configuration running now (see gate.Resume), which
// is recorded, and said, only when something had to change.
func (s *Server) postResume(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	next, notes, err := s.core.Resume(r.Context(), sess.ID, p.ID)
	if err != nil {
		return err
	}
	if notes == nil {
		notes = []string{}
	}
	writeJSON(w, http.StatusOK, Resumed{Snapshot: next.Snapshot(s.core.Now()), Notes: notes})
	return nil
}

func (s *Server) postTurn(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	var body TurnBody
	if err := decode(r, &body, false); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	t, err := s.turn(r.Context(), sess, p, body, key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// turn takes one turn for the principal, for the API and the WebSocket,
// in the turn's span when tracing: the router's decision, the gate and
// the LLM's calls in it.
func (s *Server) turn(ctx context.Context, sess *agentplane.Session, p auth.Principal, body TurnBody, key string) (TurnAnswer, error) {
	if body.Text == "" && body.Selection == nil {
		return TurnAnswer{}, invalid("a turn needs text or a selection")
	}
	in := agentplane.TurnInput{Text: body.Text, Selection: body.Selection, UI: sess.UI}
	if body.UI != nil {
		in.UI = *body.UI
	}
	// the LLM's text streams to the session's event streams as transient
	// llm_delta events
	onText := func(delta string) {
		data, _ := json.Marshal(map[string]string{"text": delta})
		s.hub.Publish(sess.ID, "llm_delta", data)
	}
	st, err := s.step(ctx, plane.StepRequest{SessionID: sess.ID, Principal: p.ID, Roles: p.Roles, Input: in, RequestID: key, OnText: onText})
	if err != nil {
		return TurnAnswer{}, err
	}
	t := st.Turn
	a := TurnAnswer{Decision: t.Decision, Result: t.Result, Snapshot: t.Session.Snapshot(s.core.Now()),
		ConfirmationToken: t.ConfirmationToken, ConfirmIntent: s.confirmIntent(t.Session, t.ConfirmationToken), Seq: t.Seq, Repeated: t.Repeated}
	if r := st.LLM; r != nil {
		a.LLM = &LLMAnswer{Text: r.Text, Calls: r.Calls, Question: r.Question, ConfirmationToken: r.ConfirmationToken,
			ConfirmIntent: s.confirmIntent(st.Session, r.ConfirmationToken), Failure: r.Failure,
			Snapshot: st.Session.Snapshot(s.core.Now())}
		if a.LLM.Calls == nil {
			a.LLM.Calls = []agentplane.ExecutionResult{}
		}
	}
	return a, nil
}

func (s *Server) postIntent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	var in agentplane.Intent
	if err := decode(r, &in, false); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	if err := checkRequestID("field \"request_id\"", in.RequestID); err != nil {
		return err
	}
	switch {
	case key != "" && in.RequestID != "" && key != in.RequestID:
		return invalid("Idempotency-Key %q and request_id %q differ: send one, or the same", truncate(key, 40), truncate(in.RequestID, 40))
	case key != "":
		in.RequestID = key
	}
	switch gate.Origin(in.Origin) {
	case "", gate.OriginAPI, gate.OriginUser, gate.OriginLLM:
	default:
		return invalid("field \"origin\": %q cannot be claimed through the API (use api, user or llm)", truncate(in.Origin, 40))
	}
	res, err := s.core.Intent(r.Context(), gate.IntentRequest{SessionID: sess.ID, Principal: p.ID, Roles: p.Roles, Intent: in})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// Page sizes of a session's history and audit pages.
const (
	defaultPage = 100
	maxPage     = 1000
)

// pageParams reads a page's cursors and size: before or after (not both)
// and limit; paged is false when none is given.
func pageParams(r *http.Request) (before, after int64, limit int, paged bool, err error) {
	q := r.URL.Query()
	if before, err = seqParam(q.Get("before"), "query parameter before"); err != nil {
		return
	}
	if after, err = seqParam(q.Get("after"), "query parameter after"); err != nil {
		return
	}
	if q.Has("before") && q.Has("after") {
		err = invalid("query parameters before and after: give one cursor, not both")
		return
	}
	if limit, err = limitParam(r, defaultPage, maxPage); err != nil {
		return
	}
	paged = q.Has("before") || q.Has("limit")
	return
}

func (s *Server) getAudit(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	before, after, limit, paged, err := pageParams(r)
	if err != nil {
		return err
	}
	if !paged {
		return s.writeChain(w, r, sess.ID, after)
	}
	recs, err := s.core.Page(r.Context(), sess.ID, before, after, limit)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, rec := range recs {
		buf.Write(rec.Raw)
		buf.WriteByte('\n')
	}
	gzipped.Write(w, r, "application/jsonl", buf.Bytes())
	return nil
}

// chainPage is how many records the whole chain's answer reads at a time.
const chainPage = 500

// writeChain answers with the session's records after a sequence number
// as JSON Lines, read and written a page at a time, so that what it holds
// does not grow with the chain (gzip when the client takes it and there
// is more than a page). A read that fails after the answer began cuts it:
// the client sees a broken response, never a short chain that looks whole.
func (s *Server) writeChain(w http.ResponseWriter, r *http.Request, session string, after int64) error {
	recs, err := s.core.RecordsAfter(r.Context(), session, after, chainPage)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, rec := range recs {
		buf.Write(rec.Raw)
		buf.WriteByte('\n')
	}
	if len(recs) < chainPage { // the whole answer
		gzipped.Write(w, r, "application/jsonl", buf.Bytes())
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", "application/jsonl")
	h.Add("Vary", "Accept-Encoding")
	var out io.Writer = w
	if gzipped.Accepts(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		z, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
		defer z.Close()
		out = z
	}
	for {
		if _, err := out.Write(buf.Bytes()); err != nil {
			return nil // the client is gone
		}
		if len(recs) < chainPage {
			return nil
		}
		after = recs[len(recs)-1].Seq
		if recs, err = s.core.RecordsAfter(r.Context(), session, after, chainPage); err != nil {
			if r.Context().Err() == nil {
				s.log.Error("audit: read the chain", "session", session, "after", after, "err", err)
			}
			panic(http.ErrAbortHandler)
		}
		buf.Reset()
		for _, rec := range recs {
			buf.Write(rec.Raw)
			buf.WriteByte('\n')
		}
	}
}

// History is a page of a session's events, in order: the same events as
// its event stream, each with its seq.
type History struct {
	Events     []json.RawMessage `json:"events"`
	MoreBefore bool              `json:"more_before"` // earlier events exist: ask again with before = the first's seq
	MoreAfter  bool              `json:"more_after"`  // later events exist: ask again with after = the last's seq
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	before, after, limit, _, err := pageParams(r)
	if err != nil {
		return err
	}
	n := limit
	if after > 0 {
		n++ // one more says whether there are more
	}
	recs, err := s.core.Page(r.Context(), sess.ID, before, after, n)
	if err != nil {
		return err
	}
	out := History{Events: make([]json.RawMessage, 0, len(recs))}
	if after > 0 && len(recs) > limit {
		recs, out.MoreAfter = recs[:limit], true
	}
	out.MoreBefore = len(recs) > 0 && recs[0].Seq > 1 || len(recs) == 0 && after > 1
	for i := range recs {
		f, err := events.Encode(&recs[i])
		if err != nil {
			return err
		}
		out.Events = append(out.Events, f.Data)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	gzipped.Write(w, r, "application/json", append(body, '\n')) // a page of events compresses about tenfold
	return nil
}

// Verification is what checking a session's audit chain found.
type Verification struct {
	Verified bool  `json:"verified"`
	Records  int   `json:"records"`  // records checked
	LastSeq  int64 `json:"last_seq"` // the last record's seq
	// FirstBad is the first record that breaks the chain, when one does.
	FirstBad *BadRecord `json:"first_bad,omitempty"`
}

// BadRecord is where a chain breaks and why.
type BadRecord struct {
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

// chain returns the whole audit chain of the principal's session, to
// verify or replay, holding one of the whole-chain reads (limits) until
// release.
func (s *Server) chain(r *http.Request, p auth.Principal) (recs []audit.Record, release func(), err error) {
	sess, err := s.owned(r, p)
	if err != nil {
		return nil, nil, err
	}
	if release, err = s.limits.holdChain(r.Context(), p, "verification or replay"); err != nil {
		return nil, nil, err
	}
	if recs, err = s.core.Records(r.Context(), sess.ID, 0); err != nil {
		release()
		return nil, nil, err
	}
	return recs, release, nil
}

func (s *Server) getVerification(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	release, err := s.limits.holdChain(r.Context(), p, "verification or replay")
	if err != nil {
		return err
	}
	defer release()
	v, err := s.core.Verify(r.Context(), sess.ID) // a page at a time, to the session's head
	if err != nil {
		return err
	}
	out := Verification{Verified: v.FirstBad == nil, Records: v.Records, LastSeq: v.LastSeq}
	if v.FirstBad != nil {
		out.FirstBad = &BadRecord{Seq: v.FirstBad.Seq, Reason: v.FirstBad.Reason}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// Replayed is a session replayed, each record on the configuration that
// decided it or every record on the one the server runs now (against):
// how the records came out differently.
type Replayed struct {
	Records int `json:"records"`
	// Total is how many divergences the replay found; Divergences holds
	// the first MaxDivergences of them, in record order.
	Total       int                 `json:"total"`
	Divergences []replay.Divergence `json:"divergences"`
	// Fallbacks are the provider reads the replay could not serve from
	// the answers the records name (the store does not keep one, or a
	// record names none), so the live provider answered them — as the
	// CLI's replay lists them; the first MaxDivergences, in record order.
	Fallbacks []replay.Fallback `json:"fallbacks"`
}

// MaxDivergences bounds the divergences a replay answer lists: a changed
// configuration can make every record of a long session diverge.
const MaxDivergences = 1000

func (s *Server) getReplay(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	recs, release, err := s.chain(r, p)
	if err != nil {
		return err
	}
	defer release()
	if err := audit.Verify(recs); err != nil {
		return agentplane.Errorf(agentplane.CodeInvalidState, "the session's audit chain does not verify, so it cannot be replayed: %v", err)
	}
	// each record on the configuration it names (the store keeps them),
	// or every record on the one in force now (?against=current): what a
	// change would have changed
	var opts replay.Options
	switch v := r.URL.Query().Get("against"); v {
	case "", "recorded":
	case "current":
		opts.Fixed = true
	default:
		return invalid("against=%q: want recorded (each record's own configuration, the default) or current", truncate(v, 40))
	}
	fell := []replay.Fallback{}
	opts.Fallback = func(f replay.Fallback) {
		if len(fell) < MaxDivergences {
			fell = append(fell, f)
		}
	}
	divs, err := replay.Session(r.Context(), s.core, recs, &opts)
	if err != nil {
		return agentplane.Errorf(agentplane.CodeInternal, "replay stopped at a record it could not replay: %v", err)
	}
	out := Replayed{Records: len(recs), Total: len(divs), Divergences: append([]replay.Divergence{}, divs[:min(len(divs), MaxDivergences)]...), Fallbacks: fell}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// seqParam reads a sequence number: a non-negative integer, 0 when empty.
func seqParam(v, what string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid("%s=%q: want a non-negative integer (an event's seq)", what, truncate(v, 40))
	}
	return n, nil
}

func (s *Server) getModes(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	// the built-in agent_list_modes over the configuration in force: a
	// read, not a call of the core's tool around the gate
	t := tool.ListModes(tool.ConfigModes(s.core.Config()), s.log)
	examples, err := boolParam(r, "include_examples")
	if err != nil {
		return err
	}
	args := `{}`
	if examples {
		args = `{"includeExamples":true}`
	}
	out, err := t.Call(r.Context(), json.RawMessage(args))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(out, '\n'))
	return nil
}

// ToolList answers GET /v1/tools.
type ToolList struct {
	Mode  string     `json:"mode"`
	Tools []ToolItem `json:"tools"`
}

// ToolItem is an active tool: what the LLM and MCP clients are offered.
type ToolItem struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Impact      string          `json:"impact"`
	Risk        string          `json:"risk"`
	// Confirmation is when a call needs the human's confirmation: never,
	// always, or unless_human (unless the human asked directly).
	Confirmation string `json:"confirmation"`
	Server       string `json:"server,omitempty"`
}

func (s *Server) getTools(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	mode := r.URL.Query().Get("mode")
	v := s.core.View() // the mode, its default and its tools from one configuration
	if !v.ModeOK(mode) {
		return invalid("query parameter mode=%q: unknown mode (GET /v1/modes lists them)", truncate(mode, 100))
	}
	if mode == "" {
		mode = v.Registry().DefaultMode()
	}
	out := ToolList{Mode: mode, Tools: []ToolItem{}}
	for _, t := range v.ActiveTools(mode, p.Roles) {
		out.Tools = append(out.Tools, ToolItem{Name: t.Spec.Name, Description: t.Spec.Usage, InputSchema: t.Spec.InputSchema,
			Impact: string(t.Spec.Impact), Risk: string(t.Spec.Risk), Confirmation: string(t.Policy), Server: t.Spec.Server})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// CommandList answers GET /v1/sessions/{id}/commands.
type CommandList struct {
	Mode     string        `json:"mode"`
	Commands []CommandItem `json:"commands"`
	// EntityTypes names the configured entity types for people.
	EntityTypes map[string]string `json:"entity_types"`
	// CommandNames are the display names of the commands the caller may
	// run in any mode, by id: a launcher's picker runs a command of its
	// target mode, and earlier turns name commands of earlier modes.
	CommandNames map[string]string `json:"command_names"`
}

// CommandItem is a command active in the session, as a client offers it:
// the web UI's mode switcher is the command that sets the mode, its
// "clear" button the one that clears the work context.
type CommandItem struct {
	ID                   string `json:"id"`
	DisplayName          string `json:"display_name"`
	Description          string `json:"description,omitempty"`
	Kind                 string `json:"kind"`
	Parameter            string `json:"parameter,omitempty"`
	CatalogID            string `json:"catalog_id,omitempty"`
	ProviderID           string `json:"provider_id,omitempty"`
	TargetCatalog        string `json:"target_catalog,omitempty"`
	OnSelect             string `json:"on_select,omitempty"`
	SetsSessionMode      bool   `json:"sets_session_mode,omitempty"`
	SetsActiveContext    bool   `json:"sets_active_context,omitempty"`
	ActiveEntityType     string `json:"active_entity_type,omitempty"`
	ClearsActiveContext  bool   `json:"clears_active_context,omitempty"`
	RequiresConfirmation bool   `json:"requires_confirmation,omitempty"`
	// Example is something a person could type to run the command: its
	// first example, else its first trigger when that needs no item.
	Example string `json:"example,omitempty"`
}

func (s *Server) getCommands(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	reg := s.core.View().Registry()
	out := CommandList{Mode: sess.Mode, Commands: []CommandItem{}, EntityTypes: reg.Config().EntityTypes, CommandNames: map[string]string{}}
	if out.EntityTypes == nil {
		out.EntityTypes = map[string]string{}
	}
	for _, m := range reg.Config().Modes {
		for _, id := range reg.ActiveCommands(m.Key, p.Roles) {
			c, _ := reg.Command(id)
			out.CommandNames[id] = c.DisplayName
		}
	}
	for _, id := range reg.ActiveCommands(sess.Mode, p.Roles) {
		c, _ := reg.Command(id)
		out.Commands = append(out.Commands, CommandItem{ID: c.ID, DisplayName: c.DisplayName, Description: c.Description, Kind: string(c.Kind),
			Parameter: c.Parameter, CatalogID: c.Source.CatalogID, ProviderID: c.Source.ProviderID, TargetCatalog: c.TargetCatalog,
			OnSelect: c.OnSelect, SetsSessionMode: c.SetsSessionMode, SetsActiveContext: c.SetsActiveContext, ActiveEntityType: c.ActiveEntityType,
			ClearsActiveContext: c.ClearsActiveContext, RequiresConfirmation: c.NeedsConfirmation(), Example: trigger.CommandExample(c)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getCatalogItems searches a catalog or provider active in the session
// (?q=, empty lists the first items; ?limit= 1 to 50, default 20): what
// a picker shows as the person types. ?mode= is the picker's target
// mode (its decision's target_mode): a launcher active in the session
// opened it on a catalog of that mode, whose selection runs there. It
// reads only: nothing is recorded.
func (s *Server) getCatalogItems(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, err := s.owned(r, p)
	if err != nil {
		return err
	}
	limit, err := limitParam(r, 20, 50)
	if err != nil {
		return err
	}
	query := r.URL.Query().Get("q")
	if !utf8.ValidString(query) {
		return invalid("query parameter q is not valid UTF-8")
	}
	src := agentplane.ResolverSource{CatalogID: r.PathValue("catalog"), ProviderID: r.PathValue("provider")}
	mode := r.URL.Query().Get("mode")
	if mode != "" && mode != sess.Mode && !s.launches(sess.Mode, p.Roles, mode, src) {
		return agentplane.Errorf(agentplane.CodeNotFound, "no launcher active in mode %q opens a picker on %s in mode %q", sess.Mode, src, truncate(mode, 100))
	}
	m, err := tool.SearchSource(r.Context(), s.core.View().Registry(), resolve.SessionCaller(sess, p.Roles, mode), src, query, limit)
	var te *tool.Error
	if errors.As(err, &te) {
		switch te.Code {
		case "bad_args":
			return invalid("query parameter q: %s", te.Message)
		case "inactive_catalog":
			return agentplane.Errorf(agentplane.CodeNotFound, "%s", te.Message)
		default:
			return agentplane.Errorf(agentplane.CodeSourceUnavailable, "%s", te.Message)
		}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// launches reports whether a launcher active in mode for the roles opens
// its picker on src in the target mode: a picker whose items come from
// another mode than the session's.
func (s *Server) launches(mode string, roles []string, target string, src agentplane.ResolverSource) bool {
	reg := s.core.View().Registry()
	for _, c := range reg.Commands() {
		if c.Kind != agentplane.KindLauncher || c.TargetMode != target || !reg.CommandActive(mode, roles, c.ID) {
			continue
		}
		if sel, ok := reg.Command(c.OnSelect); ok && sel.Source == src {
			return true
		}
	}
	return false
}

// confirmIntent is the intent that confirms the session's pending
// confirmation with its token: what the human's client posts when the
// person presses Confirm (nil without a token or a pending confirmation).
func (s *Server) confirmIntent(sess *agentplane.Session, token string) *agentplane.Intent {
	pc := sess.PendingConfirmation
	if token == "" || pc == nil {
		return nil
	}
	in := &agentplane.Intent{Type: agentplane.IntentActionCall, Origin: string(gate.OriginUser), ConfirmationToken: token, Mode: pc.Mode}
	if pc.Tool != "" {
		in.Action, in.Args = pc.Tool, pc.Args
		return in
	}
	cmd, ok := s.core.View().Registry().Command(pc.CommandID)
	if !ok {
		return nil
	}
	in.Action = cmd.ID
	in.Args, _ = json.Marshal(map[string]string{cmd.Parameter: pc.ResolvedID})
	return in
}
