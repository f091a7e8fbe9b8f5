package config

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

var (
	keyPattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

type validator struct {
	f     *file
	opts  *Options
	lines map[string]int
	probs *Problems

	catalogs  map[string]int // id -> index in f.Catalogs; "modes" -> -1
	commands  map[string]int
	toolboxes map[string]int
	modes     map[string]int
	tools     map[string]bool
}

func (v *validator) add(path, format string, args ...any) {
	*v.probs = append(*v.probs, Problem{Path: path, Line: v.lineOf(path), Msg: fmt.Sprintf(format, args...)})
}

// reported reports whether a problem at path was found already (by the
// decoder, say), so a value it could not decode is not judged again.
func (v *validator) reported(path string) bool {
	for _, p := range *v.probs {
		if p.Path == path {
			return true
		}
	}
	return false
}

// lineOf returns the line of path or of its nearest ancestor that was seen.
func (v *validator) lineOf(path string) int {
	for path != "" {
		if l, ok := v.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func (v *validator) validate() *Config {
	f := v.f
	cfg := &Config{}
	if f.Version != 1 {
		if f.Version == 0 {
			v.add("version", "missing: set version: 1")
		} else {
			v.add("version", "unsupported version %d: this agentplane reads version 1", f.Version)
		}
	}
	v.index()
	cfg.Modes = v.checkModes()
	cfg.Toolboxes = v.checkToolboxes()
	cfg.Catalogs = v.checkCatalogs()
	cfg.Tools = v.checkTools()
	cfg.MCPServers = v.checkMCPServers()
	cfg.EntityTypes = v.checkEntityTypes()
	cfg.Commands = v.checkCommands()
	cfg.Router = v.checkRouter()
	cfg.Auth = v.checkAuth()
	cfg.LLM = v.checkLLM()
	v.checkActivation(cfg)
	return cfg
}

// checkEntityTypes reads the entity types' display names.
func (v *validator) checkEntityTypes() map[string]string {
	out := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(v.f.EntityTypes)) {
		p := "entity_types." + key
		name := strings.TrimSpace(v.f.EntityTypes[key].DisplayName)
		switch {
		case !keyPattern.MatchString(key):
			v.add(p, "entity type %q: want lower-case letters, digits, _ and - (at most 64)", key)
		case name == "":
			v.add(p+".display_name", "missing: how the entity type is shown to people")
		default:
			out[key] = name
		}
	}
	return out
}

// entityTypeName is the display name configured for an entity type, or "".
func (v *validator) entityTypeName(key string) string {
	return strings.TrimSpace(v.f.EntityTypes[key].DisplayName)
}

// register records id at position i of a list in seen, reporting a
// missing, malformed (when pattern is set) or duplicate id at path.
func (v *validator) register(seen map[string]int, path, what, id string, i int, pattern bool) {
	switch {
	case id == "":
		v.add(path, "missing")
	case pattern && !keyPattern.MatchString(id):
		v.add(path, "%q: use lowercase letters, digits, '_' and '-', starting with a letter or digit", id)
	default:
		if j, dup := seen[id]; dup {
			v.add(path, "duplicate %s %q (also %ss[%d])", what, id, what, j)
		} else {
			seen[id] = i
		}
	}
}

// index records the ids of everything that can be referenced, reporting
// missing and duplicate ids.
func (v *validator) index() {
	f := v.f
	v.modes = map[string]int{}
	for i, m := range f.Modes {
		v.register(v.modes, fmt.Sprintf("modes[%d].key", i), "mode", m.Key, i, true)
	}
	v.toolboxes = map[string]int{}
	for i, t := range f.Toolboxes {
		v.register(v.toolboxes, fmt.Sprintf("toolboxes[%d].id", i), "toolbox", t.ID, i, false)
	}
	v.catalogs = map[string]int{}
	for i, c := range f.Catalogs {
		p := fmt.Sprintf("catalogs[%d].id", i)
		if c.ID == agentplane.ModesCatalog {
			v.add(p, "%q is the built-in catalog of modes; choose another id", c.ID)
			continue
		}
		v.register(v.catalogs, p, "catalog", c.ID, i, false)
	}
	v.catalogs[agentplane.ModesCatalog] = -1
	v.commands = map[string]int{}
	for i, c := range f.Commands {
		// command ids are typed in the slash form, so they follow the key pattern
		v.register(v.commands, fmt.Sprintf("commands[%d].id", i), "command", c.ID, i, true)
	}
	v.tools = map[string]bool{}
	for _, t := range agentplane.BuiltinTools {
		v.tools[t] = true
	}
	for _, t := range v.opts.Tools {
		v.tools[t] = true
	}
	for i, t := range f.Tools {
		p := fmt.Sprintf("tools[%d].name", i)
		switch {
		case t.Name == "":
			v.add(p, "missing")
		case !toolNamePattern.MatchString(t.Name):
			v.add(p, "%q: must match ^[a-zA-Z0-9_-]{1,64}$", t.Name)
		case v.tools[t.Name]:
			v.add(p, "duplicate tool %q (built-in or declared twice)", t.Name)
		default:
			v.tools[t.Name] = true
		}
	}
}

func (v *validator) refs(path string, ids []string, known func(string) bool, what string) {
	for i, id := range ids {
		if !known(id) {
			v.add(fmt.Sprintf("%s[%d]", path, i), "unknown %s %q", what, id)
		}
	}
	for i, id := range ids {
		if slices.Index(ids, id) != i {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%s %q listed twice", what, id)
		}
	}
}

func nonEmpty(v *validator, path string, list []string) {
	for i, s := range list {
		if strings.TrimSpace(s) == "" {
			v.add(fmt.Sprintf("%s[%d]", path, i), "empty")
		}
	}
}

func (v *validator) checkModes() []agentplane.Mode {
	f := v.f
	if len(f.Modes) == 0 {
		v.add("modes", "no modes: define at least one, with default: true")
	}
	var out []agentplane.Mode
	defaults := 0
	ids := map[string]int{}
	names := map[string]string{} // normalized key/alias -> mode key
	for i, m := range f.Modes {
		p := fmt.Sprintf("modes[%d]", i)
		id := strings.ToLower(m.ID)
		if m.ID == "" {
			id = agentplane.ModeID(m.Key)
		} else if !agentplane.IsModeID(id) {
			v.add(p+".id", "%q is not a GUID without hyphens (32 hexadecimal characters); leave it out to derive one from the key", m.ID)
		}
		if j, dup := ids[id]; dup && m.Key != "" {
			v.add(p+".id", "id %s is also the id of modes[%d]", id, j)
		}
		ids[id] = i
		if m.Default {
			defaults++
			if defaults > 1 {
				v.add(p+".default", "a second default mode: exactly one mode is the default")
			}
		}
		for j, a := range append([]string{m.Key}, m.Aliases...) {
			n := resolve.Normalize(a)
			if n == "" {
				v.add(fmt.Sprintf("%s.aliases[%d]", p, j-1), "empty")
				continue
			}
			if other, dup := names[n]; dup && other != m.Key {
				v.add(fmt.Sprintf("%s.aliases[%d]", p, j-1), "%q already names mode %q", a, other)
			}
			names[n] = m.Key
		}
		v.refs(p+".toolboxes", m.Toolboxes, func(s string) bool { _, ok := v.toolboxes[s]; return ok }, "toolbox")
		nonEmpty(v, p+".example_utterances", m.ExampleUtterances)
		display := m.DisplayName
		if display == "" {
			display = m.Key
		}
		out = append(out, agentplane.Mode{
			Key: m.Key, ID: id, DisplayName: display, Description: m.Description,
			SystemPromptSummary: m.SystemPromptSummary, Default: m.Default,
			Aliases: m.Aliases, HumanRoleHints: m.HumanRoleHints, ExampleUtterances: m.ExampleUtterances,
			Toolboxes: m.Toolboxes,
		})
	}
	if len(f.Modes) > 0 && defaults == 0 {
		v.add("modes", "no default mode: set default: true on exactly one mode")
	}
	return out
}

func (v *validator) checkToolboxes() []agentplane.Toolbox {
	var out []agentplane.Toolbox
	for i, t := range v.f.Toolboxes {
		p := fmt.Sprintf("toolboxes[%d]", i)
		v.refs(p+".catalogs", t.Catalogs, func(s string) bool { _, ok := v.catalogs[s]; return ok }, "catalog")
		v.refs(p+".providers", t.Providers, func(s string) bool { return slices.Contains(v.opts.Providers, s) }, "provider")
		v.refs(p+".commands", t.Commands, func(s string) bool { _, ok := v.commands[s]; return ok }, "command")
		v.refs(p+".tools", t.Tools, func(s string) bool { return v.tools[s] }, "tool")
		v.refs(p+".mcp_servers", t.MCPServers, func(s string) bool {
			for _, m := range v.f.MCPServers {
				if m.Name == s {
					return true
				}
			}
			return false
		}, "MCP server")
		nonEmpty(v, p+".required_roles", t.RequiredRoles)
		out = append(out, agentplane.Toolbox{
			ID: t.ID, DisplayName: t.DisplayName, Catalogs: t.Catalogs, Providers: t.Providers,
			Commands: t.Commands, Tools: t.Tools, MCPServers: t.MCPServers, RequiredRoles: t.RequiredRoles,
		})
	}
	return out
}

func (v *validator) checkHTTP(path string, h *httpFile) *agentplane.HTTPProviderSpec {
	u, err := url.Parse(h.URL)
	switch {
	case h.URL == "":
		v.add(path+".url", "missing")
	case err != nil:
		v.add(path+".url", "%v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		v.add(path+".url", "%q is not an http:// or https:// URL", h.URL)
	}
	if h.TimeoutMS < 0 {
		v.add(path+".timeout_ms", "must not be negative")
	}
	v.checkHeaders(path, h.Headers, h.HeadersEnv)
	return &agentplane.HTTPProviderSpec{URL: h.URL, Headers: h.Headers, HeadersEnv: h.HeadersEnv, Timeout: time.Duration(h.TimeoutMS) * time.Millisecond}
}

// shipped says which programs there are.
func shipped(programs []string) string {
	if len(programs) == 0 {
		return "it ships none"
	}
	return "it ships: " + strings.Join(programs, ", ")
}

// checkHeaders checks configured headers: valid names and values, and
// for secrets the names of the environment variables holding them.
func (v *validator) checkHeaders(path string, headers, fromEnv map[string]string) {
	for name, val := range headers {
		if !headerName.MatchString(name) {
			v.add(path+".headers."+name, "not a valid header name")
		}
		if strings.ContainsAny(val, "\r\n") {
			v.add(path+".headers."+name, "a header value cannot hold a line break")
		}
	}
	for name, env := range fromEnv {
		switch {
		case !headerName.MatchString(name):
			v.add(path+".headers_env."+name, "not a valid header name")
		case !envName.MatchString(env):
			v.add(path+".headers_env."+name, "%q is not an environment variable name", env)
		}
		if _, both := headers[name]; both {
			v.add(path+".headers_env."+name, "also in headers: give the header one value")
		}
	}
}

var (
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (v *validator) checkCatalogs() []agentplane.Catalog {
	var out []agentplane.Catalog
	for i, c := range v.f.Catalogs {
		p := fmt.Sprintf("catalogs[%d]", i)
		cat := agentplane.Catalog{ID: c.ID, DisplayName: c.DisplayName, EntityType: c.EntityType, TTL: time.Duration(c.TTLSeconds) * time.Second}
		if cat.DisplayName == "" {
			cat.DisplayName = c.ID
		}
		switch {
		case c.Provider != nil && c.Items != nil:
			v.add(p, "has both items and a provider: choose one")
		case c.Provider == nil && c.Items == nil:
			v.add(p, "has neither items nor a provider")
		}
		if c.Provider != nil {
			if c.Provider.HTTP == nil {
				v.add(p+".provider", "missing http: a catalog provider is {http: {url: ...}}")
			} else {
				cat.Provider = &agentplane.ProviderSpec{HTTP: v.checkHTTP(p+".provider.http", c.Provider.HTTP)}
			}
		} else if c.TTLSeconds != 0 {
			v.add(p+".ttl_seconds", "only a catalog with a provider has a TTL")
		}
		if c.TTLSeconds < 0 {
			v.add(p+".ttl_seconds", "must not be negative")
		}
		seen := map[string]int{}
		for j, it := range c.Items {
			ip := fmt.Sprintf("%s.items[%d]", p, j)
			if it.ID == "" {
				v.add(ip+".id", "missing")
			} else if k, dup := seen[it.ID]; dup {
				v.add(ip+".id", "duplicate item id %q (also items[%d])", it.ID, k)
			}
			seen[it.ID] = j
			if strings.TrimSpace(it.DisplayName) == "" {
				v.add(ip+".display_name", "missing")
			}
			for k, r := range it.Related {
				rp := fmt.Sprintf("%s.related[%d]", ip, k)
				for _, miss := range []struct{ key, val string }{{"entity_type", r.EntityType}, {"id", r.ID}, {"role", r.Role}} {
					if miss.val == "" {
						v.add(rp+"."+miss.key, "missing: every related entity needs entity_type, id and role")
					}
				}
			}
			cat.Items = append(cat.Items, it.Item())
		}
		out = append(out, cat)
	}
	return out
}

func (v *validator) checkTools() []Tool {
	var out []Tool
	for i, t := range v.f.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if strings.TrimSpace(t.Description) == "" {
			v.add(p+".description", "missing: say what the tool does, for the LLM and for people")
		}
		if !slices.Contains([]string{"read", "internal", "external"}, t.Impact) {
			v.add(p+".impact", "%q: must be read, internal or external", t.Impact)
		}
		risk := t.Risk
		if risk == "" {
			risk = "low"
		} else if !slices.Contains([]string{"low", "medium", "high"}, risk) {
			v.add(p+".risk", "%q: must be low, medium or high", t.Risk)
		}
		tool := Tool{Name: t.Name, Description: t.Description, Impact: t.Impact, Risk: risk, RequiresConfirmation: t.RequiresConfirmation, Idempotent: t.Idempotent,
			InputSchema: t.InputSchema, Timeout: time.Duration(t.TimeoutMS) * time.Millisecond}
		if tool.InputSchema == nil {
			tool.InputSchema = map[string]any{"type": "object"}
		} else if err := CheckObjectSchema(tool.InputSchema); err != nil {
			v.add(p+".input_schema", "%v", err)
		}
		if t.TimeoutMS < 0 {
			v.add(p+".timeout_ms", "must not be negative")
		}
		switch {
		case t.HTTP != nil && t.Program != "":
			v.add(p, "has both http and program: choose one")
		case t.HTTP != nil:
			tool.HTTP = v.checkHTTP(p+".http", t.HTTP)
		case t.Program != "":
			if !slices.Contains(v.opts.Programs, t.Program) {
				v.add(p+".program", "%q is not a program this binary ships (%s)", t.Program, shipped(v.opts.Programs))
			}
			tool.Program = t.Program
		default:
			v.add(p, "missing a transport: http: {url: ...} for a service, or program: NAME for one the binary ships")
		}
		out = append(out, tool)
	}
	return out
}

func (v *validator) checkMCPServers() []MCPServer {
	var out []MCPServer
	seen := map[string]int{}
	for i, m := range v.f.MCPServers {
		p := fmt.Sprintf("mcp_servers[%d]", i)
		v.register(seen, p+".name", "mcp_server", m.Name, i, true)
		switch {
		case len(m.Command) == 0 && m.URL == "":
			v.add(p, "needs a command (stdio) or a url (streamable HTTP)")
		case len(m.Command) > 0 && m.URL != "":
			v.add(p, "has both a command and a url: choose one")
		case m.URL != "":
			v.checkHTTP(p, &httpFile{URL: m.URL, Headers: m.Headers, HeadersEnv: m.HeadersEnv})
		case len(m.Headers) > 0 || len(m.HeadersEnv) > 0:
			v.add(p, "headers are for a server over HTTP (url), not one over stdio")
		}
		prefix := m.Prefix
		if prefix == "" {
			prefix = m.Name
		}
		if !toolNamePattern.MatchString(prefix) {
			v.add(p+".prefix", "%q: must match ^[a-zA-Z0-9_-]{1,64}$", prefix)
		} else {
			v.checkPrefix(p+".prefix", m.Name, prefix, out)
		}
		for tool, imp := range m.Impact {
			if !slices.Contains([]string{"read", "internal", "external"}, imp) {
				v.add(p+".impact."+tool, "%q: must be read, internal or external", imp)
			}
		}
		if m.ConnectTimeoutMS < 0 || m.TimeoutMS < 0 {
			v.add(p, "timeouts must not be negative")
		}
		out = append(out, MCPServer{Name: m.Name, Prefix: prefix, Command: m.Command, URL: m.URL, Headers: m.Headers, HeadersEnv: m.HeadersEnv, Impact: m.Impact,
			ConnectTimeout: time.Duration(m.ConnectTimeoutMS) * time.Millisecond, CallTimeout: time.Duration(m.TimeoutMS) * time.Millisecond})
	}
	return out
}

// checkPrefix refuses an MCP server's tool prefix under which a mounted
// tool could take the name of a built-in or configured tool, or of another
// server's tools: tools are named PREFIX_TOOL.
func (v *validator) checkPrefix(path, server, prefix string, before []MCPServer) {
	names := make([]string, 0, len(v.tools))
	for name := range v.tools {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(name, prefix+"_") {
			v.add(path, "%q: a tool of this server could be named like the tool %q (mounted tools are named %s_TOOL); choose another prefix", prefix, name, prefix)
			return
		}
	}
	for _, o := range before {
		if strings.HasPrefix(prefix+"_", o.Prefix+"_") || strings.HasPrefix(o.Prefix+"_", prefix+"_") {
			v.add(path, "%q: the tools of MCP servers %q (prefix %q) and %q could have the same names; choose prefixes neither of which starts the other", prefix, o.Name, o.Prefix, server)
			return
		}
	}
}

func (v *validator) catalogEntityType(id string) string {
	if i, ok := v.catalogs[id]; ok {
		if i < 0 {
			return "mode"
		}
		return v.f.Catalogs[i].EntityType
	}
	return ""
}

func (v *validator) checkCommands() []agentplane.CommandDefinition {
	var out []agentplane.CommandDefinition
	slash := map[string]string{} // normalized id/alias -> command id
	for _, c := range v.f.Commands {
		slash[c.ID] = c.ID
	}
	for i, c := range v.f.Commands {
		p := fmt.Sprintf("commands[%d]", i)
		cmd := agentplane.CommandDefinition{
			ID: c.ID, DisplayName: c.DisplayName, Description: c.Description, Kind: agentplane.CommandKind(c.Kind),
			Tool: c.Tool, Parameter: c.Parameter, PickerType: c.PickerType,
			TargetCatalog: c.TargetCatalog, TargetMode: c.TargetMode, OnSelect: c.OnSelect,
			SetsSessionMode: c.SetsSessionMode, SetsActiveContext: c.SetsActiveContext, ClearsActiveContext: c.ClearsActiveContext,
			ActiveEntityType: c.ActiveEntityType, ActiveEntityName: v.entityTypeName(c.ActiveEntityType), Domain: c.Domain,
			RequiresConfirmation: c.RequiresConfirmation, ProducesSideEffects: c.ProducesSideEffects,
			ConfirmationText: c.ConfirmationText,
			Aliases:          c.Aliases, Triggers: c.Triggers, Examples: c.Examples,
		}
		if cmd.DisplayName == "" {
			cmd.DisplayName = c.ID
		}
		if cmd.PickerType == "" {
			cmd.PickerType = "list"
		}
		if c.Resolver != nil {
			cmd.Source = agentplane.ResolverSource{CatalogID: c.Resolver.Catalog, ProviderID: c.Resolver.Provider}
		}
		switch cmd.Kind {
		case "":
			cmd.Kind = agentplane.KindExecutable
			fallthrough
		case agentplane.KindExecutable:
			v.checkExecutable(p, c, &cmd)
		case agentplane.KindLauncher:
			v.checkLauncher(p, c)
		default:
			v.add(p+".kind", "%q: must be executable or launcher", c.Kind)
		}
		if c.TargetMode != "" {
			if _, ok := v.modes[c.TargetMode]; !ok {
				v.add(p+".target_mode", "unknown mode %q", c.TargetMode)
			} else if cmd.Kind != agentplane.KindLauncher {
				v.add(p+".target_mode", "only a launcher has a target mode (its selection runs there); an executable command switches modes with sets_session_mode")
			}
		}
		for j, a := range c.Aliases {
			ap := fmt.Sprintf("%s.aliases[%d]", p, j)
			n := strings.ToLower(strings.TrimSpace(a))
			if !keyPattern.MatchString(n) {
				v.add(ap, "%q: a slash alias is one word of lowercase letters, digits, '_' and '-'", a)
				continue
			}
			if other, dup := slash[n]; dup && other != c.ID {
				v.add(ap, "/%s already names command %q", n, other)
			} else if dup {
				v.add(ap, "/%s is already this command's id or alias", n)
			}
			slash[n] = c.ID
		}
		for j, t := range c.Triggers {
			tp := fmt.Sprintf("%s.triggers[%d]", p, j)
			pat, err := trigger.Parse(t)
			if err != nil {
				v.add(tp, "%v", err)
				continue
			}
			switch {
			case cmd.Kind == agentplane.KindLauncher && pat.HasSlot():
				v.add(tp, "a launcher's trigger has no {slot}: it opens a picker instead")
			case cmd.Kind == agentplane.KindExecutable && !pat.HasSlot():
				v.add(tp, "no {item} slot: an executable command needs its one parameter (use kind: launcher for an entry point without one)")
			}
		}
		nonEmpty(v, p+".examples", c.Examples)
		if pc := c.Preconditions; pc != nil {
			v.refs(p+".preconditions.modes", pc.Modes, func(s string) bool { _, ok := v.modes[s]; return ok }, "mode")
			nonEmpty(v, p+".preconditions.requires_active", pc.RequiresActive)
			cmd.Preconditions = agentplane.Preconditions{Modes: pc.Modes, RequiresActive: pc.RequiresActive}
		}
		if c.ConfirmationText != "" && !cmd.NeedsConfirmation() {
			v.add(p+".confirmation_text", "the command needs no confirmation (set requires_confirmation or produces_side_effects)")
		}
		out = append(out, cmd)
	}
	return out
}

func (v *validator) checkExecutable(p string, c commandFile, cmd *agentplane.CommandDefinition) {
	if c.Tool == "" {
		v.add(p+".tool", "missing: an executable command runs a tool")
	} else if !v.tools[c.Tool] {
		v.add(p+".tool", "unknown tool %q (declare it under tools: or use a built-in: %s)", c.Tool, strings.Join(agentplane.BuiltinTools, ", "))
	}
	if c.Parameter == "" {
		v.add(p+".parameter", "missing: name the command's one parameter")
	}
	switch {
	case c.Resolver == nil:
		v.add(p+".resolver", "missing: {catalog: ID} or {provider: NAME}")
	case c.Resolver.Catalog != "" && c.Resolver.Provider != "":
		v.add(p+".resolver", "names both a catalog and a provider: choose one")
	case c.Resolver.Catalog != "":
		if _, ok := v.catalogs[c.Resolver.Catalog]; !ok {
			v.add(p+".resolver.catalog", "unknown catalog %q", c.Resolver.Catalog)
		}
	case c.Resolver.Provider != "":
		if !slices.Contains(v.opts.Providers, c.Resolver.Provider) {
			v.add(p+".resolver.provider", "unknown provider %q", c.Resolver.Provider)
		}
	default:
		v.add(p+".resolver", "empty: {catalog: ID} or {provider: NAME}")
	}
	for _, f := range []struct{ key, val string }{{"target_catalog", c.TargetCatalog}, {"on_select", c.OnSelect}} {
		if f.val != "" {
			v.add(p+"."+f.key, "only a launcher has %s", f.key)
		}
	}
	if c.SetsSessionMode && (c.Resolver == nil || c.Resolver.Catalog != agentplane.ModesCatalog) {
		v.add(p+".sets_session_mode", "a command that sets the mode resolves against the catalog %q", agentplane.ModesCatalog)
	}
	if c.SetsActiveContext && c.ClearsActiveContext {
		v.add(p+".clears_active_context", "a command either sets or clears the active context, not both")
	}
	if c.SetsActiveContext {
		et := ""
		if c.Resolver != nil {
			et = v.catalogEntityType(c.Resolver.Catalog)
		}
		switch {
		case c.ActiveEntityType == "" && et == "":
			v.add(p+".active_entity_type", "missing: required with sets_active_context")
		case c.ActiveEntityType == "":
			cmd.ActiveEntityType = et
		case et != "" && et != c.ActiveEntityType:
			v.add(p+".active_entity_type", "%q, but catalog %q holds %q entities", c.ActiveEntityType, c.Resolver.Catalog, et)
		}
	} else if c.ActiveEntityType != "" {
		v.add(p+".active_entity_type", "only meaningful with sets_active_context: true")
	}
}

func (v *validator) checkLauncher(p string, c commandFile) {
	if c.TargetCatalog == "" {
		v.add(p+".target_catalog", "missing: a launcher opens a picker on its target catalog")
	} else if _, ok := v.catalogs[c.TargetCatalog]; !ok {
		v.add(p+".target_catalog", "unknown catalog %q", c.TargetCatalog)
	}
	if c.OnSelect == "" {
		v.add(p+".on_select", "missing: the command a selection invokes")
	} else if j, ok := v.commands[c.OnSelect]; !ok {
		v.add(p+".on_select", "unknown command %q", c.OnSelect)
	} else {
		target := v.f.Commands[j]
		switch {
		case target.Kind == string(agentplane.KindLauncher):
			v.add(p+".on_select", "%q is a launcher; on_select names an executable command", c.OnSelect)
		case target.Resolver == nil || target.Resolver.Catalog != c.TargetCatalog:
			v.add(p+".on_select", "%q does not resolve against catalog %q, so a pick from the picker cannot be passed to it", c.OnSelect, c.TargetCatalog)
		}
	}
	for _, f := range []struct {
		key string
		set bool
	}{{"tool", c.Tool != ""}, {"parameter", c.Parameter != ""}, {"resolver", c.Resolver != nil},
		{"sets_session_mode", c.SetsSessionMode}, {"sets_active_context", c.SetsActiveContext}, {"clears_active_context", c.ClearsActiveContext},
		{"requires_confirmation", c.RequiresConfirmation}, {"produces_side_effects", c.ProducesSideEffects},
		{"confirmation_text", c.ConfirmationText != ""}} {
		if f.set {
			v.add(p+"."+f.key, "a launcher runs nothing itself; put %s on its on_select command", f.key)
		}
	}
}

func (v *validator) checkRouter() Router {
	r := v.f.Router
	out := Router{
		Fillers:         trigger.DefaultFillers,
		PickerTTL:       DefaultPickerTTL,
		ConfirmationTTL: DefaultConfirmationTTL,
		MaxOptions:      DefaultMaxOptions,

		ExampleThreshold: DefaultExampleThreshold,
	}
	if t := r.ExampleThreshold; t != nil && !v.reported("router.example_threshold") {
		if *t <= 0 || *t > 1 || math.IsNaN(*t) {
			v.add("router.example_threshold", "must be greater than 0 and at most 1")
		} else {
			out.ExampleThreshold = *t
		}
	}
	nonEmpty(v, "router.negative_examples", r.NegativeExamples)
	out.NegativeExamples = r.NegativeExamples
	if len(r.NegativeExamples) > 0 {
		examples := map[string]string{} // normalized example -> command id
		for _, c := range v.f.Commands {
			for _, e := range c.Examples {
				examples[resolve.Normalize(e)] = c.ID
			}
		}
		for i, e := range r.NegativeExamples {
			if id, ok := examples[resolve.Normalize(e)]; ok && strings.TrimSpace(e) != "" {
				v.add(fmt.Sprintf("router.negative_examples[%d]", i), "%q is also an example of command %q: an utterance cannot both ask for it and ask for nothing", e, id)
			}
		}
	}
	if r.Fillers != nil {
		nonEmpty(v, "router.fillers", *r.Fillers)
		out.Fillers = *r.Fillers
	}
	if r.PickerTTLSeconds < 0 {
		v.add("router.picker_ttl_seconds", "must not be negative")
	} else if r.PickerTTLSeconds > 0 {
		out.PickerTTL = time.Duration(r.PickerTTLSeconds) * time.Second
	}
	if r.ConfirmationTTLSeconds < 0 {
		v.add("router.confirmation_ttl_seconds", "must not be negative")
	} else if r.ConfirmationTTLSeconds > 0 {
		out.ConfirmationTTL = time.Duration(r.ConfirmationTTLSeconds) * time.Second
	}
	switch {
	case r.MaxOptions < 0 || r.MaxOptions > 20:
		v.add("router.max_options", "must be between 1 and 20")
	case r.MaxOptions > 0:
		out.MaxOptions = r.MaxOptions
	}
	return out
}

// checkActivation enforces that whatever a command needs is active wherever
// the command is: in every toolbox that exposes a command, within the same
// mode, a toolbox needing no more roles enables the command's catalog or
// provider (and, for a launcher, its target catalog and on_select command).
func (v *validator) checkActivation(cfg *Config) {
	if len(*v.probs) > 0 {
		return // references are broken; these checks would only repeat them
	}
	tbByID := map[string]*agentplane.Toolbox{}
	for i := range cfg.Toolboxes {
		tbByID[cfg.Toolboxes[i].ID] = &cfg.Toolboxes[i]
	}
	cmdByID := map[string]*agentplane.CommandDefinition{}
	for i := range cfg.Commands {
		cmdByID[cfg.Commands[i].ID] = &cfg.Commands[i]
	}
	modeBoxes := map[string][]string{}
	for _, m := range cfg.Modes {
		modeBoxes[m.Key] = m.Toolboxes
	}
	reported := map[string]bool{}
	for _, m := range cfg.Modes {
		for _, tbID := range m.Toolboxes {
			tb := tbByID[tbID]
			// enabled reports whether, in the mode, whoever may use tb also
			// has a toolbox enabling the thing.
			enabled := func(mode string, has func(*agentplane.Toolbox) bool) bool {
				for _, other := range modeBoxes[mode] {
					o := tbByID[other]
					if has(o) && subset(o.RequiredRoles, tb.RequiredRoles) {
						return true
					}
				}
				return false
			}
			for _, cid := range tb.Commands {
				c := cmdByID[cid]
				i := v.commands[cid]
				needIn := func(mode, path, what, id string, has func(*agentplane.Toolbox) bool) {
					key := path + "|" + mode
					if enabled(mode, has) || reported[key] {
						return
					}
					reported[key] = true
					if mode == m.Key {
						v.add(path, "%s %q is not enabled in mode %q, where toolbox %q makes this command active (add it to a toolbox of that mode)", what, id, m.Key, tb.ID)
					} else {
						v.add(path, "%s %q is not enabled in mode %q, the target mode of this launcher, which toolbox %q makes active in mode %q (add it to a toolbox of mode %q)", what, id, mode, tb.ID, m.Key, mode)
					}
				}
				need := func(path, what, id string, has func(*agentplane.Toolbox) bool) { needIn(m.Key, path, what, id, has) }
				if c.Kind == agentplane.KindLauncher {
					// its selection runs in its target mode: what it
					// selects must be active there
					in := m.Key
					if c.TargetMode != "" {
						in = c.TargetMode
					}
					needIn(in, fmt.Sprintf("commands[%d].target_catalog", i), "catalog", c.TargetCatalog, func(t *agentplane.Toolbox) bool { return slices.Contains(t.Catalogs, c.TargetCatalog) })
					needIn(in, fmt.Sprintf("commands[%d].on_select", i), "command", c.OnSelect, func(t *agentplane.Toolbox) bool { return slices.Contains(t.Commands, c.OnSelect) })
					continue
				}
				if c.Source.CatalogID != "" {
					need(fmt.Sprintf("commands[%d].resolver.catalog", i), "catalog", c.Source.CatalogID, func(t *agentplane.Toolbox) bool { return slices.Contains(t.Catalogs, c.Source.CatalogID) })
				} else {
					need(fmt.Sprintf("commands[%d].resolver.provider", i), "provider", c.Source.ProviderID, func(t *agentplane.Toolbox) bool { return slices.Contains(t.Providers, c.Source.ProviderID) })
				}
			}
		}
	}
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

var (
	userIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envPattern    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

func (v *validator) checkAuth() Auth {
	var out Auth
	digests := map[string]int{}
	for i, k := range v.f.Auth.Keys {
		p := fmt.Sprintf("auth.keys[%d]", i)
		switch {
		case !userIDPattern.MatchString(k.UserID):
			v.add(p+".user_id", "%q: must be 1-128 letters, digits or _.@:- starting with a letter or digit", k.UserID)
		case k.UserID == agentplane.LocalPrincipal:
			v.add(p+".user_id", "%q is the terminal's own principal: an API key's user would reach its sessions; choose another id", k.UserID)
		}
		nonEmpty(v, p+".roles", k.Roles)
		switch {
		case k.Key != "":
			v.add(p+".key", "keys are not written in configuration: give key_sha256 (the hex SHA-256 of the key, e.g. printf %%s KEY | sha256sum) or key_env (the environment variable holding it)")
		case k.KeySHA256 != "" && k.KeyEnv != "":
			v.add(p, "has both key_sha256 and key_env: choose one")
		case k.KeySHA256 == "" && k.KeyEnv == "":
			v.add(p, "needs key_sha256 (the hex SHA-256 of the key) or key_env (the environment variable holding it)")
		case k.KeySHA256 != "" && !sha256Pattern.MatchString(k.KeySHA256):
			v.add(p+".key_sha256", "must be 64 lowercase hex digits (a SHA-256 digest)")
		case k.KeyEnv != "" && !envPattern.MatchString(k.KeyEnv):
			v.add(p+".key_env", "%q is not an environment variable name", k.KeyEnv)
		case k.KeySHA256 != "":
			if j, dup := digests[k.KeySHA256]; dup {
				v.add(p+".key_sha256", "the same key as auth.keys[%d]: a key stands for one principal", j)
			}
			digests[k.KeySHA256] = i
		}
		out.Keys = append(out.Keys, APIKey{UserID: k.UserID, Roles: k.Roles, KeySHA256: k.KeySHA256, KeyEnv: k.KeyEnv})
	}
	out.OIDC = v.checkOIDC()
	return out
}

func (v *validator) checkOIDC() *OIDC {
	f := v.f.Auth.OIDC
	if f == nil {
		return nil
	}
	out := &OIDC{Issuer: strings.TrimRight(f.Issuer, "/"), Audience: f.Audience, UserClaim: cmp.Or(f.UserClaim, DefaultUserClaim), RolesClaim: f.RolesClaim,
		AllowedAlgs: f.AllowedAlgs, RequiredScopes: f.RequiredScopes, ClientID: f.ClientID, Scopes: f.Scopes}
	if u, err := url.Parse(f.Issuer); f.Issuer == "" || err != nil || u.Host == "" || u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname())) {
		v.add("auth.oidc.issuer", "%q: want the provider's https issuer URL (http only on loopback, for tests)", f.Issuer)
	}
	if strings.TrimSpace(f.Audience) == "" {
		v.add("auth.oidc.audience", "missing: this server's resource identifier, which a token's aud must hold (e.g. https://agentplane.example.com/mcp)")
	}
	if len(out.AllowedAlgs) == 0 {
		out.AllowedAlgs = DefaultAlgs
	}
	for i, a := range out.AllowedAlgs {
		if !slices.Contains(KnownAlgs, a) {
			v.add(fmt.Sprintf("auth.oidc.allowed_algs[%d]", i), "%q: want one of %s (never none)", a, strings.Join(KnownAlgs, ", "))
		}
	}
	if len(out.Scopes) == 0 {
		out.Scopes = []string{"openid"}
	}
	for _, s := range append(slices.Clone(out.RequiredScopes), out.Scopes...) {
		if s == "" || strings.ContainsAny(s, " \t\"\\") {
			v.add("auth.oidc", "scope %q: a scope is one word", s)
		}
	}
	return out
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (v *validator) checkLLM() *LLM {
	f := v.f.LLM
	if f == nil {
		return nil
	}
	out := &LLM{BaseURL: strings.TrimRight(f.BaseURL, "/"), Model: f.Model, APIKeyEnv: f.APIKeyEnv, Timeout: DefaultLLMTimeout,
		MaxToolRounds: DefaultMaxToolRounds, MaxHistoryTurns: DefaultMaxHistoryTurns, Temperature: f.Temperature}
	if u, err := url.Parse(f.BaseURL); f.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("llm.base_url", "%q: want the endpoint's http(s) URL, e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1", f.BaseURL)
	}
	if strings.TrimSpace(f.Model) == "" {
		v.add("llm.model", "missing: the model name the endpoint serves")
	}
	if f.APIKeyEnv != "" && !envPattern.MatchString(f.APIKeyEnv) {
		v.add("llm.api_key_env", "%q is not an environment variable name", f.APIKeyEnv)
	}
	switch {
	case f.TimeoutMS < 0:
		v.add("llm.timeout_ms", "must not be negative")
	case f.TimeoutMS > 0:
		out.Timeout = time.Duration(f.TimeoutMS) * time.Millisecond
	}
	switch {
	case f.MaxToolRounds < 0 || f.MaxToolRounds > MaxLLMToolRounds:
		v.add("llm.max_tool_rounds", "must be between 1 and %d", MaxLLMToolRounds)
	case f.MaxToolRounds > 0:
		out.MaxToolRounds = f.MaxToolRounds
	}
	switch {
	case f.MaxHistoryTurns < 0 || f.MaxHistoryTurns > MaxLLMHistoryTurns:
		v.add("llm.max_history_turns", "must be between 1 and %d", MaxLLMHistoryTurns)
	case f.MaxHistoryTurns > 0:
		out.MaxHistoryTurns = f.MaxHistoryTurns
	}
	if t := f.Temperature; t != nil && (*t < 0 || *t > 2 || math.IsNaN(*t)) {
		v.add("llm.temperature", "must be between 0 and 2")
	}
	return out
}
