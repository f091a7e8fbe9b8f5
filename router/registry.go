package router

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

// Registry is a configuration compiled for routing: catalogs indexed,
// triggers expanded and indexed, providers wired. Build it once at load
// time; it is immutable and safe for concurrent use.
type Registry struct {
	cfg         *config.Config
	modes       map[string]*agentplane.Mode
	defaultMode string
	toolboxes   map[string]*agentplane.Toolbox
	modeBoxes   map[string][]*agentplane.Toolbox // mode key -> its toolboxes, in order
	commands    []*agentplane.CommandDefinition
	commandIdx  map[string]int
	slash       map[string]int // command id or alias -> command index
	catalogs    map[string]*agentplane.Catalog
	sources     map[agentplane.ResolverSource]*resolve.Source
	triggers    *trigger.Set
	fillers     trigger.Fillers
	settings    config.Router
	mcpPrefix   map[string]string // MCP server name -> tool name prefix
	boxCommands map[string][]int  // toolbox id -> indices of its commands
	detector    *exemplar.Model   // commands recognised from examples; nil without any
	labelCmd    []int             // example model label -> command index
	cmdLabel    []int             // command index -> example model label, -1 without examples
}

// Options configure NewRegistry. The zero value is usable.
type Options struct {
	// Providers are the code-backed resolver providers, by the name
	// commands use in resolver: {provider: NAME}.
	Providers map[string]resolve.Provider
	// Now is the clock for provider caches; nil means time.Now.
	Now func() time.Time
	// HTTPClient fetches HTTP catalog providers; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// ConfigOptions returns the config.Options that validate a configuration
// against these registry options (the provider names they supply).
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

// NewRegistry compiles a validated configuration. It fails when a catalog
// cannot be indexed or a provider named by the configuration is missing.
func NewRegistry(cfg *config.Config, opts *Options) (*Registry, error) {
	if opts == nil {
		opts = &Options{}
	}
	r := &Registry{
		cfg:        cfg,
		modes:      map[string]*agentplane.Mode{},
		toolboxes:  map[string]*agentplane.Toolbox{},
		modeBoxes:  map[string][]*agentplane.Toolbox{},
		commandIdx: map[string]int{},
		slash:      map[string]int{},
		catalogs:   map[string]*agentplane.Catalog{},
		sources:    map[agentplane.ResolverSource]*resolve.Source{},
		triggers:   trigger.NewSet(),
		fillers:    trigger.NewFillers(cfg.Router.Fillers),
		settings:   cfg.Router,
		mcpPrefix:  map[string]string{},
	}
	for _, m := range cfg.MCPServers {
		r.mcpPrefix[m.Name] = m.Prefix
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
			continue
		}
		src, err := resolve.NewStaticSource(id, c.Items)
		if err != nil {
			return nil, fmt.Errorf("index catalog %q: %w", c.ID, err)
		}
		r.sources[id] = src
	}
	patterns := make([][]*trigger.Pattern, len(cfg.Commands))
	for i := range cfg.Commands {
		c := &cfg.Commands[i]
		r.commands = append(r.commands, c)
		r.commandIdx[c.ID] = i
		r.slash[c.ID] = i
		for _, a := range c.Aliases {
			r.slash[a] = i
		}
		if c.Source.ProviderID != "" {
			id := c.Source
			if _, done := r.sources[id]; !done {
				p, ok := opts.Providers[c.Source.ProviderID]
				if !ok {
					return nil, fmt.Errorf("command %q: no provider %q registered", c.ID, c.Source.ProviderID)
				}
				r.sources[id] = resolve.NewProviderSource(id, p, 0, opts.Now)
			}
		}
		for _, t := range c.Triggers {
			p, err := trigger.Parse(t)
			if err != nil {
				return nil, fmt.Errorf("command %q: %w", c.ID, err)
			}
			r.triggers.Add(i, p)
			patterns[i] = append(patterns[i], p)
		}
	}
	r.boxCommands = map[string][]int{}
	for _, tb := range r.toolboxes {
		for _, id := range tb.Commands {
			if i, ok := r.commandIdx[id]; ok {
				r.boxCommands[tb.ID] = append(r.boxCommands[tb.ID], i)
			}
		}
	}
	var err error
	if r.detector, r.labelCmd, err = trainExamples(r.commands, patterns); err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}
	r.cmdLabel = make([]int, len(r.commands))
	for i := range r.cmdLabel {
		r.cmdLabel[i] = -1
	}
	for l, i := range r.labelCmd {
		r.cmdLabel[i] = l
	}
	return r, nil
}

// Config returns the configuration the registry was built from.
func (r *Registry) Config() *config.Config { return r.cfg }

// DefaultMode returns the key of the default mode.
func (r *Registry) DefaultMode() string { return r.defaultMode }

// Mode returns the mode with the key.
func (r *Registry) Mode(key string) (*agentplane.Mode, bool) {
	m, ok := r.modes[key]
	return m, ok
}

// Command returns the command with the id.
func (r *Registry) Command(id string) (*agentplane.CommandDefinition, bool) {
	i, ok := r.commandIdx[id]
	if !ok {
		return nil, false
	}
	return r.commands[i], true
}

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

// Settings returns the router settings.
func (r *Registry) Settings() config.Router { return r.settings }

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

// ToolActive reports whether the tool is offered (to the LLM and MCP
// clients) for a session in the mode with a principal holding the roles.
//
// A tool mounted from an MCP server (PREFIX_TOOL) is active where a toolbox
// lists that server.
func (r *Registry) ToolActive(mode string, roles []string, name string) bool {
	for _, tb := range r.modeBoxes[mode] {
		if !tb.Allows(roles) {
			continue
		}
		if slices.Contains(tb.Tools, name) {
			return true
		}
		for _, srv := range tb.MCPServers {
			if p, ok := r.mcpPrefix[srv]; ok && strings.HasPrefix(name, p+"_") {
				return true
			}
		}
	}
	return false
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
