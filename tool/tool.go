// Package tool is the tool contract: a validated spec (name, usage text for
// the LLM, input and output JSON Schemas, impact, risk, confirmation) and
// the code that runs, collected in a Registry that refuses bad tools at
// registration. One spec renders both the OpenAI function-tool schema and
// the MCP tool definition.
//
//	reg := tool.NewRegistry()
//	err := reg.Register(tool.ListModes(catalog, logger))
//	t, _ := reg.Get("agent_list_modes")
//	out, err := t.Call(ctx, json.RawMessage(`{"includeExamples": true}`))
package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/canonjson"
)

// Impact says what a tool may change.
type Impact string

// Impacts.
const (
	ImpactRead     Impact = "read"     // nothing
	ImpactInternal Impact = "internal" // only control-plane state (sessions)
	ImpactExternal Impact = "external" // the world: mail, money, files
)

// Risk grades how much harm a wrong call can do.
type Risk string

// Risks.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Spec describes a tool.
type Spec struct {
	Name                 string          // ^[a-zA-Z0-9_-]{1,64}$
	Usage                string          // guidance for the LLM: when to call it and when not
	InputSchema          json.RawMessage // JSON Schema of the arguments, an object schema
	OutputSchema         json.RawMessage // optional JSON Schema of the result
	Impact               Impact
	Risk                 Risk
	RequiresConfirmation bool
	// Idempotent says a second call with the same arguments changes
	// nothing more (a read always; setting a mode; a PUT-like action).
	// MCP clients are told it as idempotentHint.
	Idempotent bool
	// Server is the MCP server the tool is mounted from, "" for the
	// program's own tools: a toolbox that lists the server offers it.
	Server string
}

// Tool is a spec and the code that runs it. Call gets the arguments as a
// JSON object that already passed the input schema, and returns a JSON
// result or an error (preferably an *Error). Implementations are safe for
// concurrent use.
//
// The gate gives a call a deadline (the tool's timeout). Once ctx is done,
// Call must stop and must not act on the world any more: the gate has
// recorded the call as timed out, and a late action would be one nobody
// sees. Pass ctx to every request the tool makes, and check it before
// anything irreversible.
type Tool interface {
	Spec() Spec
	Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// Error is a typed tool failure.
type Error struct {
	Code    string // a stable code, e.g. "http_status", "timeout", "catalog_unavailable"
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Registry holds tools by name. Safe for concurrent use: tools of an MCP
// server that comes up late are registered while others run.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	schemas map[string]*jsonschema.Schema
	prev    *Registry // a copy of the registry whose checked schemas are reused (NewRegistryAfter); never changed
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]Tool{}, schemas: map[string]*jsonschema.Schema{}}
}

// NewRegistryAfter returns an empty registry that takes the checked and
// compiled schemas of prev's tools for a tool registered under the same
// name with the same schemas, byte for byte: a configuration reloaded
// compiles only the schemas that changed. prev may be nil.
func NewRegistryAfter(prev *Registry) *Registry {
	r := NewRegistry()
	if prev != nil { // a copy: prev may still register, and its own prev is not kept
		prev.mu.RLock()
		r.prev = &Registry{tools: maps.Clone(prev.tools), schemas: maps.Clone(prev.schemas)}
		prev.mu.RUnlock()
	}
	return r
}

// checked returns the compiled input schema of the tool prev registered
// under s's name with exactly s's schemas.
func (r *Registry) checked(s Spec) (*jsonschema.Schema, bool) {
	if r.prev == nil {
		return nil, false
	}
	t, ok := r.prev.tools[s.Name]
	if !ok {
		return nil, false
	}
	ps := t.Spec()
	if !bytes.Equal(ps.InputSchema, s.InputSchema) || !bytes.Equal(ps.OutputSchema, s.OutputSchema) {
		return nil, false
	}
	return r.prev.schemas[s.Name], true
}

// Register adds t. It refuses, saying exactly why, a name that does not
// match ^[a-zA-Z0-9_-]{1,64}$, empty usage text, an input schema that does
// not compile or is not an object schema, an output schema that does not
// compile, an unknown impact or risk, or a name registered already.
func (r *Registry) Register(t Tool) error {
	s := t.Spec()
	var problems []string
	if !namePattern.MatchString(s.Name) {
		problems = append(problems, fmt.Sprintf("name %q must match ^[a-zA-Z0-9_-]{1,64}$", s.Name))
	}
	if strings.TrimSpace(s.Usage) == "" {
		problems = append(problems, "empty usage text: tell the LLM when to call the tool and when not to")
	}
	switch s.Impact {
	case ImpactRead, ImpactInternal, ImpactExternal:
	default:
		problems = append(problems, fmt.Sprintf("impact %q must be read, internal or external", s.Impact))
	}
	switch s.Risk {
	case RiskLow, RiskMedium, RiskHigh:
	default:
		problems = append(problems, fmt.Sprintf("risk %q must be low, medium or high", s.Risk))
	}
	compiled, ok := r.checked(s)
	if !ok {
		var err error
		if compiled, err = checkSchemas(s); err != nil {
			problems = append(problems, err.Error())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[s.Name]; dup {
		problems = append(problems, fmt.Sprintf("a tool named %q is registered already", s.Name))
	}
	if len(problems) > 0 {
		return fmt.Errorf("tool: register %q: %s", s.Name, strings.Join(problems, "; "))
	}
	r.tools[s.Name] = t
	r.schemas[s.Name] = compiled
	return nil
}

// checkSchemas compiles s's input schema, which must be a JSON object
// schema, and checks that its output schema, if any, compiles.
func checkSchemas(s Spec) (*jsonschema.Schema, error) {
	var in map[string]any
	if err := canonjson.Check(s.InputSchema); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(s.InputSchema, &in); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %v", err)
	}
	compiled, err := config.CompileObjectSchema("tools/"+s.Name, in)
	if err != nil {
		return nil, errors.New("input schema " + err.Error())
	}
	if len(s.OutputSchema) > 0 {
		var out map[string]any
		if err := json.Unmarshal(s.OutputSchema, &out); err != nil {
			return nil, fmt.Errorf("output schema is not a JSON object: %v", err)
		}
		if _, err := config.CompileSchema("output", out); err != nil {
			return nil, fmt.Errorf("output schema does not compile: %v", err)
		}
	}
	return compiled, nil
}

// Get returns the tool with the name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.tools))
	for n := range r.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrNoTool is returned for a name nothing is registered under.
var ErrNoTool = errors.New("tool: no such tool")

// OpenAIFunction renders the spec as an OpenAI chat-completions function tool.
func (s Spec) OpenAIFunction() map[string]any {
	return map[string]any{
		"type": "function",
		"function": map[string]any{
			"name":        s.Name,
			"description": s.Usage,
			"parameters":  json.RawMessage(s.InputSchema),
		},
	}
}

// MCPTool is the MCP tool definition (tools/list) of a spec.
type MCPTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  MCPAnnotations  `json:"annotations"`
}

// MCPAnnotations are the MCP tool hints.
type MCPAnnotations struct {
	ReadOnlyHint    bool `json:"readOnlyHint"`
	DestructiveHint bool `json:"destructiveHint"`
	OpenWorldHint   bool `json:"openWorldHint"`
}

// MCP renders the spec as an MCP tool definition.
func (s Spec) MCP() MCPTool {
	return MCPTool{Name: s.Name, Description: s.Usage, InputSchema: s.InputSchema, OutputSchema: s.OutputSchema,
		Annotations: MCPAnnotations{
			ReadOnlyHint:    s.Impact == ImpactRead,
			DestructiveHint: s.Impact == ImpactExternal && s.Risk == RiskHigh,
			OpenWorldHint:   s.Impact == ImpactExternal,
		}}
}

// ErrUnavailable is returned by a tool that is declared but cannot run now
// (not connected); the gate reports it as tool_unavailable.
var ErrUnavailable = errors.New("tool: not connected")

// Validate checks args against the tool's input schema and returns them as
// canonical JSON (RFC 8785), so equal arguments are equal bytes. Arguments
// with a member name twice (or twice in different letter case) or invalid
// UTF-8 are refused: a schema check and a tool's decoder could read them
// differently. The error says what is wrong, for the LLM to fix.
func (r *Registry) Validate(name string, args json.RawMessage) (json.RawMessage, error) {
	r.mu.RLock()
	sch, ok := r.schemas[name]
	r.mu.RUnlock()
	if !ok {
		return nil, ErrNoTool
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if len(args) > MaxArgsBytes {
		return nil, fmt.Errorf("args are %d bytes; at most %d", len(args), MaxArgsBytes)
	}
	if err := canonjson.Check(args); err != nil {
		return nil, fmt.Errorf("args are not strict JSON: %v", err)
	}
	canonical, err := canonjson.Append(nil, args, nil)
	if err != nil {
		return nil, fmt.Errorf("args are not strict JSON: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canonical))
	if err != nil {
		return nil, fmt.Errorf("args are not JSON: %v", err)
	}
	if err := sch.Validate(doc); err != nil {
		return nil, fmt.Errorf("args %s do not match the input schema: %s", canonical, strings.TrimSpace(err.Error()))
	}
	return canonical, nil
}

// MaxArgsBytes is the most a tool call's arguments may weigh, whoever
// sends them (an HTTP body is already held to as much; an MCP client's
// call or the LLM's is held to it here).
const MaxArgsBytes = 1 << 20

// Func is a Tool made of a spec and a function.
type Func struct {
	S  Spec
	Fn func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// Spec returns the spec.
func (f *Func) Spec() Spec { return f.S }

// Call calls the function.
func (f *Func) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	return f.Fn(ctx, args)
}

// CallInfo is what a tool may know about the call besides its arguments:
// the invocation context every tool gets (Context: who, where, on what,
// how authorised; HTTP and MCP tools get the same), and, for tools
// compiled into the binary, the whole session. Both are read only.
type CallInfo struct {
	Context agentplane.InvocationContext
	// Session is the session as it was when the call was decided on.
	Session *agentplane.Session
}

// Invocation is the invocation context to send downstream: nil for a
// call made outside the gate (it carries none).
func (ci CallInfo) Invocation() *agentplane.InvocationContext {
	if ci.Context.SessionID == "" {
		return nil
	}
	return &ci.Context
}

// Key is the call's idempotency key downstream: the context's
// IdempotencyKey, or its request id.
func (ci CallInfo) Key() string {
	if ci.Context.IdempotencyKey != "" {
		return ci.Context.IdempotencyKey
	}
	return ci.Context.RequestID
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying the call's info; the gate sets it.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the call's info, if the context carries it.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}
