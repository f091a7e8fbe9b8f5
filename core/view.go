package core

import (
	"encoding/json"
	"slices"

	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/tool"
)

// View is the configuration in force at one moment, whole: its
// configuration, digest, compiled registry and tools' specs all come from
// one snapshot, so a front end that reads several of them and then acts
// never mixes two configurations while a Reload puts a new one in force.
// A View never changes (tools an MCP server mounts late aside); take a new
// one for each request. It gives the tools' specs, never the tools: a tool
// runs only through the gate (Execute, Turn, Intent).
type View struct{ s *snapshot }

// View returns the configuration in force.
func (c *Core) View() View { return View{s: c.cur()} }

// Config returns the configuration.
func (v View) Config() *config.Config { return v.s.cfg }

// Digest returns the configuration's digest (config.Digest), which every
// audit record of a decision or an execution under it carries.
func (v View) Digest() string { return v.s.digest }

// Registry returns the compiled configuration: modes, commands, catalogs,
// toolboxes and what is active for whom. It is read-only; what it
// resolves (catalogs' providers) only reads.
func (v View) Registry() *registry.Registry { return v.s.reg }

// Tool returns a registered tool's spec and policy; false when no tool has
// the name.
func (v View) Tool(name string) (ToolInfo, bool) {
	t, ok := v.s.tools.Get(name)
	if !ok {
		return ToolInfo{}, false
	}
	s := t.Spec()
	return ToolInfo{Spec: s, Policy: gate.ToolPolicy(s), ByKey: tool.ByKey(t)}, true
}

// Tools returns every registered tool's spec and policy, by name.
func (v View) Tools() []ToolInfo {
	names := v.s.tools.Names()
	slices.Sort(names)
	out := make([]ToolInfo, 0, len(names))
	for _, name := range names {
		if t, ok := v.Tool(name); ok {
			out = append(out, t)
		}
	}
	return out
}

// Validate checks arguments against a tool's input schema and returns
// them in canonical form (see tool.Registry.Validate): tool.ErrNoTool for
// no such tool, else an error that says what is wrong.
func (v View) Validate(name string, args json.RawMessage) (json.RawMessage, error) {
	return v.s.tools.Validate(name, args)
}

// ActiveTools returns the tools offered to the LLM and MCP clients for a
// session in the mode with a principal holding the roles, by name.
func (v View) ActiveTools(mode string, roles []string) []ToolInfo {
	var out []ToolInfo
	for _, name := range v.s.tools.Names() {
		t, ok := v.Tool(name)
		if ok && v.s.reg.ToolActive(mode, roles, t.Spec.Name, t.Spec.Server) {
			out = append(out, t)
		}
	}
	return out
}

// ModeOK reports whether the configuration has the mode; "" is the
// default mode.
func (v View) ModeOK(mode string) bool {
	if mode == "" {
		return true
	}
	_, ok := v.s.reg.Mode(mode)
	return ok
}
