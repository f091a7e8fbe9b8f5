// Package registry is a configuration compiled once for use: catalogs
// indexed, providers wired, and the one place that says what is active for
// a session and a principal — which modes, toolboxes, catalogs, providers,
// commands, tools and MCP servers. The router, the gate, replay, scenario
// tests and the built-in tools all take a *Registry; none of them decides
// activity on its own.
//
//	reg, err := registry.New(cfg, nil)
//	ok := reg.CommandActive("sales", roles, "send_template_to_list")
package registry

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/resolve"
)

// Registry is a compiled configuration. It is immutable and safe for
// concurrent use.
type Registry struct {
	cfg         *config.Config
	modes       map[string]*agentplane.Mode
	defaultMode string
	toolboxes   map[string]*agentplane.Toolbox
	modeBoxes   map[string][]*agentplane.Toolbox // mode key -> its toolboxes, in order
	commands    []*agentplane.CommandDefinition
	commandIdx  map[string]int
	catalogs    map[string]*agentplane.Catalog
	sources     map[agentplane.ResolverSource]*resolve.Source
	boxCommands map[string][]int // toolbox id -> indices of its commands
}

// Options configure New. nil means defaults.
type Options struct {
	// Providers are the code-backed resolver providers, by the name
	// commands use in resolver: {provider: NAME}.
	Providers map[string]resolve.Provider
	// Now is the clock for provider caches; nil means time.Now.
	Now func() time.Time
	// HTTPClient fetches HTTP catalog providers; nil means a client that
	// follows no redirect to another origin.
	HTTPClient *http.Client
	// Keep keeps each answer of a provider by its version before it is
	// served (resolve.KeepFunc: the store's PutCatalogVersion), so the
	// versions decisions name can be found again; nil keeps nothing.
	Keep resolve.KeepFunc
}

// ConfigOptions returns the config.Options that validate a configuration
// against these options (the provider names they supply).
func (o *Options) ConfigOptions() *config.Options {
	co := &config.Options{}
	if o != nil {
		for name := range o.Providers {
			co.Providers = append(co.Providers, name)
		}
		slices.Sort(co.Providers)
	}
	return co
}

// New compiles a validated configuration. It fails when a catalog cannot
// be indexed or a provider named by the configuration is missing.
func New(cfg *config.Config, opts *Options) (*Registry, error) {
	if opts == nil {
		opts = &Options{}
	}
	r := &Registry{
		cfg:         cfg,
		modes:       map[string]*agentplane.Mode{},
		toolboxes:   map[string]*agentplane.Toolbox{},
		modeBoxes:   map[string][]*agentplane.Toolbox{},
		commandIdx:  map[string]int{},
		catalogs:    map[string]*agentplane.Catalog{},
		sources:     map[agentplane.ResolverSource]*resolve.Source{},
		boxCommands: map[string][]int{},
	}
	for i := range cfg.Toolboxes {
		r.toolboxes[cfg.Toolboxes[i].ID] = &cfg.Toolboxes[i]
	}
	for i := range cfg.Modes {
		m := &cfg.Modes[i]
		r.modes[m.Key] = m
		if m.Default {
			r.defaultMode = m.Key
		}
		for _, id := range m.Toolboxes {
			r.modeBoxes[m.Key] = append(r.modeBoxes[m.Key], r.toolboxes[id])
		}
	}
	modes := cfg.ModesCatalog()
	catalogs := append([]agentplane.Catalog{modes}, cfg.Catalogs...)
	for i := range catalogs {
		c := &catalogs[i]
		r.catalogs[c.ID] = c
		id := agentplane.ResolverSource{CatalogID: c.ID}
		if c.Provider != nil && c.Provider.HTTP != nil {
			h := c.Provider.HTTP
			p := &resolve.HTTPProvider{URL: h.URL, Headers: h.Headers, Timeout: h.Timeout, Client: opts.HTTPClient}
			r.sources[id] = resolve.NewProviderSource(id, p, c.TTL, opts.Now)
			r.sources[id].Keep(opts.Keep)
			continue
		}
		src, err := resolve.NewStaticSource(id, c.Items)
		if err != nil {
			return nil, fmt.Errorf("index catalog %q: %w", c.ID, err)
		}
		r.sources[id] = src
	}
	for i := range cfg.Commands {
		c := &cfg.Commands[i]
		r.commands = append(r.commands, c)
		r.commandIdx[c.ID] = i
		if c.Source.ProviderID != "" {
			id := c.Source
			if _, done := r.sources[id]; !done {
				p, ok := opts.Providers[c.Source.ProviderID]
				if !ok {
					return nil, fmt.Errorf("command %q: no provider %q registered", c.ID, c.Source.ProviderID)
				}
				r.sources[id] = resolve.NewProviderSource(id, p, 0, opts.Now)
				r.sources[id].Keep(opts.Keep)
			}
		}
	}
	for _, tb := range r.toolboxes {
		for _, id := range tb.Commands {
			if i, ok := r.commandIdx[id]; ok {
				r.boxCommands[tb.ID] = append(r.boxCommands[tb.ID], i)
			}
		}
	}
	return r, nil
}

// Config returns the configuration the registry was built from.
func (r *Registry) Config() *config.Config { return r.cfg }

// Settings returns the router settings.
func (r *Registry) Settings() config.Router { return r.cfg.Router }

// DefaultMode returns the key of the default mode.
func (r *Registry) DefaultMode() string { return r.defaultMode }

// Mode returns the mode with the key.
func (r *Registry) Mode(key string) (*agentplane.Mode, bool) {
	m, ok := r.modes[key]
	return m, ok
}

// ModeOf returns the mode a session with the stored mode key runs in: the
// key itself, or the default mode when the configuration no longer has it.
func (r *Registry) ModeOf(key string) string {
	if _, ok := r.modes[key]; ok {
		return key
	}
	return r.defaultMode
}

// Command returns the command with the id.
func (r *Registry) Command(id string) (*agentplane.CommandDefinition, bool) {
	i, ok := r.commandIdx[id]
	if !ok {
		return nil, false
	}
	return r.commands[i], true
}

// Commands returns every command in configuration order; the index of a
// command there is its index everywhere (ToolboxCommands).
func (r *Registry) Commands() []*agentplane.CommandDefinition { return r.commands }

// Catalog returns the catalog with the id, including the built-in modes catalog.
func (r *Registry) Catalog(id string) (*agentplane.Catalog, bool) {
	c, ok := r.catalogs[id]
	return c, ok
}

// Source returns the resolver source of a catalog or provider.
func (r *Registry) Source(id agentplane.ResolverSource) (*resolve.Source, bool) {
	s, ok := r.sources[id]
	return s, ok
}

// ActiveToolboxes returns the toolboxes of the mode that the roles allow.
func (r *Registry) ActiveToolboxes(mode string, roles []string) []*agentplane.Toolbox {
	var out []*agentplane.Toolbox
	for _, tb := range r.modeBoxes[mode] {
		if tb.Allows(roles) {
			out = append(out, tb)
		}
	}
	return out
}

// ModeToolboxes returns the mode's toolboxes, in order, whatever the roles
// (check each with Allows). The slice is the registry's: do not change it.
func (r *Registry) ModeToolboxes(mode string) []*agentplane.Toolbox { return r.modeBoxes[mode] }

// ToolboxCommands returns the indices (in Commands) of a toolbox's commands.
func (r *Registry) ToolboxCommands(toolbox string) []int { return r.boxCommands[toolbox] }

// CommandActive reports whether the command is active for a session in the
// mode with a principal holding the roles.
func (r *Registry) CommandActive(mode string, roles []string, id string) bool {
	for _, tb := range r.modeBoxes[mode] {
		if slices.Contains(tb.Commands, id) && tb.Allows(roles) {
			return true
		}
	}
	return false
}

// SourceActive reports whether the catalog or provider is active for a
// session in the mode with a principal holding the roles.
func (r *Registry) SourceActive(mode string, roles []string, src agentplane.ResolverSource) bool {
	for _, tb := range r.modeBoxes[mode] {
		var on bool
		if src.ProviderID != "" {
			on = slices.Contains(tb.Providers, src.ProviderID)
		} else {
			on = slices.Contains(tb.Catalogs, src.CatalogID)
		}
		if on && tb.Allows(roles) {
			return true
		}
	}
	return false
}

// ToolActive reports whether a tool is offered (to the LLM and MCP
// clients) for a session in the mode with a principal holding the roles:
// a toolbox active for them lists the tool by name, or, for a tool mounted
// from an MCP server (server is its name, "" for the program's own tools),
// lists that server.
func (r *Registry) ToolActive(mode string, roles []string, name, server string) bool {
	for _, tb := range r.modeBoxes[mode] {
		if !tb.Allows(roles) {
			continue
		}
		if slices.Contains(tb.Tools, name) || server != "" && slices.Contains(tb.MCPServers, server) {
			return true
		}
	}
	return false
}

// Launcher returns the id of a launcher active in the mode for the roles
// whose selections go to the command cmdID in the target mode: the one way
// a command runs in a mode that is not the session's.
func (r *Registry) Launcher(mode string, roles []string, cmdID, target string) (string, bool) {
	for _, c := range r.commands {
		if c.Kind == agentplane.KindLauncher && c.OnSelect == cmdID && c.TargetMode == target && r.CommandActive(mode, roles, c.ID) {
			return c.ID, true
		}
	}
	return "", false
}

// ActiveCommands returns the ids of the commands active in the mode for the
// roles, in configuration order.
func (r *Registry) ActiveCommands(mode string, roles []string) []string {
	var out []string
	for _, c := range r.commands {
		if r.CommandActive(mode, roles, c.ID) {
			out = append(out, c.ID)
		}
	}
	return out
}

// Preconditions returns why the command's declared preconditions do not
// hold for a session in the mode with that active work context, or "".
// It is pure: the router checks it before asking for a confirmation, the
// gate before running.
func Preconditions(cmd *agentplane.CommandDefinition, mode string, awc agentplane.ActiveWorkContext) string {
	pre := cmd.Preconditions
	if len(pre.Modes) > 0 && !slices.Contains(pre.Modes, mode) {
		return fmt.Sprintf("runs only in mode %s, the session is in %q", strings.Join(pre.Modes, " or "), mode)
	}
	if len(pre.RequiresActive) > 0 && (awc.Entity == nil || !slices.Contains(pre.RequiresActive, awc.EntityType)) {
		return fmt.Sprintf("needs an active %s; open one first", strings.Join(pre.RequiresActive, " or "))
	}
	return ""
}

// ConfirmationQuestion is the question asked before cmd runs on the item
// with this display name.
func ConfirmationQuestion(cmd *agentplane.CommandDefinition, itemName string) string {
	if cmd.ConfirmationText != "" {
		return strings.ReplaceAll(cmd.ConfirmationText, "{item}", itemName)
	}
	return fmt.Sprintf("Confirm %s: '%s'?", cmd.DisplayName, itemName)
}
