package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/store"
)

// argsSchemas compiles, for every command, the JSON Schema of its
// arguments: an object with exactly its one parameter, a string. Commands
// with the same parameter share one compiled schema.
func argsSchemas(cmds []*agentplane.CommandDefinition) (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	byParam := map[string]*jsonschema.Schema{}
	out := map[string]*jsonschema.Schema{}
	for _, cmd := range cmds {
		if cmd.Kind == agentplane.KindLauncher {
			continue
		}
		if s, ok := byParam[cmd.Parameter]; ok {
			out[cmd.ID] = s
			continue
		}
		doc := map[string]any{
			"type":                 "object",
			"properties":           map[string]any{cmd.Parameter: map[string]any{"type": "string", "minLength": 1}},
			"required":             []any{cmd.Parameter},
			"additionalProperties": false,
		}
		loc := "mem://args/" + url.PathEscape(cmd.Parameter) + ".json"
		if err := c.AddResource(loc, doc); err != nil {
			return nil, err
		}
		s, err := c.Compile(loc)
		if err != nil {
			return nil, fmt.Errorf("gate: args schema of %s: %w", cmd.ID, err)
		}
		byParam[cmd.Parameter], out[cmd.ID] = s, s
	}
	return out, nil
}

// IntentRequest is a chat control protocol intent on a session, with who
// sends it.
type IntentRequest struct {
	SessionID string
	Principal string
	Roles     []string
	Intent    agentplane.Intent
	// Approval is a workflow call's approval (Invocation.Approval): set by
	// replay from the record, never from a client's intent.
	Approval string
}

// Intent carries out a chat control protocol intent. An action_call names
// a tool or a command; a command's args are validated against its argument
// schema (an object with exactly its one parameter) and then executed as
// Execute does, as is a tool's. The origin defaults to api; a confirmation
// token in the intent confirms (from the human only). A
// clarification_request changes nothing: it is recorded and answered with
// an empty diff.
func (g *Gate) Intent(ctx context.Context, r IntentRequest) (agentplane.ExecutionResult, error) {
	in := r.Intent
	inv := Invocation{SessionID: r.SessionID, CommandID: in.Action, RequestID: in.RequestID, Origin: Origin(in.Origin),
		Principal: r.Principal, Roles: r.Roles, ConfirmationToken: in.ConfirmationToken, Mode: in.Mode, Approval: r.Approval}
	if inv.Origin == "" {
		inv.Origin = OriginAPI
	}
	if !inv.Origin.Valid() {
		return rejected(agentplane.CodeInvalidInput, "origin %q: want one of user, api, llm, mcp, workflow, agent_internal", inv.Origin), nil
	}
	in.Origin, in.ConfirmationToken = string(inv.Origin), "" // the record never holds a token
	switch in.Type {
	case agentplane.IntentActionCall:
		if len(in.Args) > 0 {
			if err := canonjson.Check(in.Args); err != nil {
				in.Args = nil // the record holds JSON; the message says what came
				return g.refuse(ctx, r, &in, rejected(agentplane.CodeInvalidArgs, "%s: args are not strict JSON: %v", in.Action, err))
			}
		}
		cmd, ok := g.reg.Command(in.Action)
		if _, isTool := g.tools.Get(in.Action); isTool && !(ok && g.asCommand(ctx, r.SessionID, cmd, in.Args)) {
			inv.CommandID, inv.Tool, inv.Args = "", in.Action, in.Args
			return g.Execute(ctx, inv)
		}
		if ok && cmd.Kind != agentplane.KindLauncher {
			if msg := g.checkArgs(cmd, in.Args); msg != "" {
				return g.refuse(ctx, r, &in, rejected(agentplane.CodeInvalidArgs, "%s: %s", cmd.ID, msg))
			}
			var args map[string]string
			json.Unmarshal(in.Args, &args)
			inv.ResolvedID = args[cmd.Parameter]
		}
		return g.Execute(ctx, inv) // an unknown command or a launcher is rejected there
	case agentplane.IntentClarificationRequest:
		if strings.TrimSpace(in.Question) == "" {
			return g.refuse(ctx, r, &in, rejected(agentplane.CodeInvalidArgs, "a clarification_request needs a question"))
		}
		res := agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: in.Question}
		return g.refuse(ctx, r, &in, res)
	}
	return g.refuse(ctx, r, &in, rejected(agentplane.CodeInvalidArgs, "intent type %q: want action_call or clarification_request", in.Type))
}

// asCommand says whether an action that names both a tool and a command
// runs as the command: when its args are the command's (its one
// parameter), unless the session's pending confirmation is the LLM's
// proposal of the tool. So a confirmation is answered the way it was
// asked, a token or "yes" alike, with the command's effects and wording,
// and a command that asks for confirmation cannot be run without it by
// calling its tool by the same name.
func (g *Gate) asCommand(ctx context.Context, session string, cmd *agentplane.CommandDefinition, args json.RawMessage) bool {
	if cmd.Kind == agentplane.KindLauncher || g.checkArgs(cmd, args) != "" {
		return false
	}
	sess, err := g.store.Session(ctx, session)
	if err != nil {
		return true // the command's execution reports it
	}
	pc := sess.PendingConfirmation
	return pc == nil || pc.Tool != cmd.ID
}

// checkArgs validates args against the command's schema and returns what is
// wrong, or "".
func (g *Gate) checkArgs(cmd *agentplane.CommandDefinition, args json.RawMessage) string {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Sprintf("args are not JSON: %v", err)
	}
	if err := g.argSchemas[cmd.ID].Validate(doc); err != nil {
		var verr *jsonschema.ValidationError
		if ok := asValidation(err, &verr); ok {
			return fmt.Sprintf("args %s do not match {%q: string}: %s", args, cmd.Parameter, strings.TrimSpace(verr.Error()))
		}
		return err.Error()
	}
	return ""
}

func asValidation(err error, target **jsonschema.ValidationError) bool {
	v, ok := err.(*jsonschema.ValidationError)
	if ok {
		*target = v
	}
	return ok
}

// refuse records an intent that changes nothing and returns its result.
func (g *Gate) refuse(ctx context.Context, r IntentRequest, in *agentplane.Intent, res agentplane.ExecutionResult) (agentplane.ExecutionResult, error) {
	sess, err := g.store.Session(ctx, r.SessionID)
	if err != nil {
		if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
			return rejected(agentplane.CodeNotFound, "no session %q", r.SessionID), nil
		}
		return agentplane.ExecutionResult{}, err
	}
	res.RequestID = in.RequestID
	res = unchanged(res, sess)
	rec := &audit.Record{Session: r.SessionID, Time: g.now().UTC(), Kind: audit.KindExecution, Config: g.config, Principal: r.Principal, Base: sess.Version,
		Intent: in, Roles: slices.Clone(r.Roles), Result: &res, State: sess}
	if err := g.store.Commit(ctx, &store.Commit{SessionID: r.SessionID, Record: rec}); err != nil {
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: record intent on session %s: %w", r.SessionID, err)
	}
	return res, nil
}
