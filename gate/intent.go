package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
)

// argsSchemas compiles, for every command, the JSON Schema of its
// arguments: an object with exactly its one parameter, a string.
func argsSchemas(cmds []*agentplane.CommandDefinition) (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	out := map[string]*jsonschema.Schema{}
	for _, cmd := range cmds {
		if cmd.Kind == agentplane.KindLauncher {
			continue
		}
		doc := map[string]any{
			"type":                 "object",
			"properties":           map[string]any{cmd.Parameter: map[string]any{"type": "string", "minLength": 1}},
			"required":             []any{cmd.Parameter},
			"additionalProperties": false,
		}
		url := "mem://commands/" + cmd.ID + ".json"
		if err := c.AddResource(url, doc); err != nil {
			return nil, err
		}
		s, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("gate: args schema of %s: %w", cmd.ID, err)
		}
		out[cmd.ID] = s
	}
	return out, nil
}

// Intent carries out a chat control protocol intent on a session for a
// principal with the given roles and origin. An action_call's args are
// validated against the command's argument schema (an object with exactly
// its one parameter) and then executed as Execute does. A
// clarification_request changes nothing: it is recorded and answered with
// an empty diff.
func (g *Gate) Intent(ctx context.Context, sessionID string, roles []string, in agentplane.Intent) (agentplane.ExecutionResult, error) {
	inv := Invocation{SessionID: sessionID, CommandID: in.Action, RequestID: in.RequestID, Origin: Origin(in.Origin),
		Roles: roles, ConfirmationToken: in.ConfirmationToken}
	if inv.Origin == "" {
		inv.Origin = OriginAPI
	}
	switch in.Type {
	case agentplane.IntentActionCall:
		if len(in.Args) > 0 && !json.Valid(in.Args) {
			in.Args = nil // the record holds JSON; the message says what came
			return g.refuse(ctx, sessionID, roles, &in, rejected(agentplane.CodeInvalidArgs, "%s: args are not JSON", in.Action))
		}
		if _, isTool := g.tools.Get(in.Action); isTool {
			inv.CommandID, inv.Tool, inv.Args = "", in.Action, in.Args
			return g.Execute(ctx, inv)
		}
		cmd, ok := g.reg.Command(in.Action)
		if ok && cmd.Kind != agentplane.KindLauncher {
			if msg := g.checkArgs(cmd, in.Args); msg != "" {
				return g.refuse(ctx, sessionID, roles, &in, rejected(agentplane.CodeInvalidArgs, "%s: %s", cmd.ID, msg))
			}
			var args map[string]string
			json.Unmarshal(in.Args, &args)
			inv.ResolvedID = args[cmd.Parameter]
		}
		return g.Execute(ctx, inv) // an unknown command or a launcher is rejected there
	case agentplane.IntentClarificationRequest:
		if strings.TrimSpace(in.Question) == "" {
			return g.refuse(ctx, sessionID, roles, &in, rejected(agentplane.CodeInvalidArgs, "a clarification_request needs a question"))
		}
		res := agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: in.Question}
		return g.refuse(ctx, sessionID, roles, &in, res)
	}
	return g.refuse(ctx, sessionID, roles, &in, rejected(agentplane.CodeInvalidArgs, "intent type %q: want action_call or clarification_request", in.Type))
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
func (g *Gate) refuse(ctx context.Context, sessionID string, roles []string, in *agentplane.Intent, res agentplane.ExecutionResult) (agentplane.ExecutionResult, error) {
	sess, err := g.store.Session(ctx, sessionID)
	if err != nil {
		if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
			return rejected(agentplane.CodeNotFound, "no session %q", sessionID), nil
		}
		return agentplane.ExecutionResult{}, err
	}
	res.RequestID = in.RequestID
	res = unchanged(res, sess)
	rec := &audit.Record{Session: sessionID, Time: g.now().UTC(), Kind: audit.KindExecution, Intent: in, Roles: slices.Clone(roles), Result: &res, State: sess}
	c := &Commit{SessionID: sessionID, Record: rec}
	if err := g.store.Commit(ctx, c); err != nil {
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: record intent on session %s: %w", sessionID, err)
	}
	g.mirror(rec)
	return res, nil
}
