// Package config loads and validates agentplane configuration files.
//
// A configuration is one YAML file: modes, toolboxes, catalogs, commands,
// tools and router settings. Parse reports every problem it finds, each with
// its path and line, and returns a configuration only when there is none:
//
//	cfg, err := config.Load("agentplane.yaml", nil)
//	var probs config.Problems
//	if errors.As(err, &probs) {
//		for _, p := range probs {
//			fmt.Println(p) // agentplane.yaml:40: commands[2].resolver.catalog: unknown catalog "emial_templates"
//		}
//	}
package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane"
)

// Config is a validated configuration, in domain types. Slices keep the
// order of the file; that order breaks ties in routing.
type Config struct {
	Modes      []agentplane.Mode
	Toolboxes  []agentplane.Toolbox
	Catalogs   []agentplane.Catalog // without the built-in modes catalog
	Commands   []agentplane.CommandDefinition
	Tools      []Tool
	MCPServers []MCPServer
	Router     Router
	Auth       Auth
	LLM        *LLM // nil: no LLM configured

	// EntityTypes names the entity types for people (email_template →
	// "email template"); a type not listed is shown as its key.
	EntityTypes map[string]string
}

// EntityTypeName is how an entity type is shown: its configured display
// name, else its key with underscores as spaces.
func (c *Config) EntityTypeName(key string) string {
	if n := c.EntityTypes[key]; n != "" {
		return n
	}
	return strings.ReplaceAll(key, "_", " ")
}

// LLM is the OpenAI-compatible chat-completions endpoint that answers
// continue_with_llm turns.
type LLM struct {
	BaseURL         string        // e.g. https://api.openai.com/v1, http://127.0.0.1:8081/v1
	Model           string        // the model name the endpoint knows
	APIKeyEnv       string        // the environment variable holding the key; "" for none
	Timeout         time.Duration // one request, streaming included; default 60s
	MaxToolRounds   int           // model calls per turn; default 4
	MaxHistoryTurns int           // user turns of history sent; default 10
	Temperature     *float64      // nil: the endpoint's default
}

// LLM defaults.
const (
	DefaultLLMTimeout      = 60 * time.Second
	DefaultMaxToolRounds   = 4
	DefaultMaxHistoryTurns = 10
	MaxLLMToolRounds       = 32
	MaxLLMHistoryTurns     = 200
)

// Auth says who may use the server: API keys and the principals they
// stand for. No keys: the server serves one local principal on loopback.
type Auth struct {
	Keys []APIKey
	OIDC *OIDC // nil: no identity provider
}

// OIDC is the OpenID Connect provider whose access tokens the server
// accepts beside its API keys (package auth verifies them).
type OIDC struct {
	Issuer   string // the provider's issuer URL; its discovery document names the rest
	Audience string // what a token's aud must hold: this server's resource identifier
	// UserClaim is the claim whose value is the principal's id ("sub" by
	// default); RolesClaim the claim holding its roles, a dotted path for
	// nested ones (realm_access.roles), "" for none.
	UserClaim, RolesClaim string
	AllowedAlgs           []string // signature algorithms accepted; RS256 and ES256 by default
	// RequiredScopes must all be in a token's scope (scp) claim; a token
	// without them is refused with insufficient_scope.
	RequiredScopes []string
	// ClientID is the public client the web page signs in as
	// (authorization code with PKCE; no secret), "" for no page sign-in;
	// Scopes what it asks for ("openid" by default).
	ClientID string
	Scopes   []string
}

// OIDC defaults and the algorithms a token may be signed with.
const DefaultUserClaim = "sub"

// DefaultAlgs are the algorithms accepted when allowed_algs is absent.
var DefaultAlgs = []string{"RS256", "ES256"}

// KnownAlgs are the JWS algorithms allowed_algs may name ("none" never).
var KnownAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// APIKey maps a key to a principal. The key is never in the file: either
// its SHA-256 digest (hex) or the environment variable holding it.
type APIKey struct {
	UserID    string
	Roles     []string
	KeySHA256 string // 64 lowercase hex digits; "" when KeyEnv is set
	KeyEnv    string // the variable holding the key; read when the server starts
}

// MCPServer is a downstream MCP server whose tools are mounted as
// PREFIX_TOOL.
type MCPServer struct {
	Name           string
	Prefix         string            // the name when the file gives none
	Command        []string          // stdio
	URL            string            // streamable HTTP
	Headers        map[string]string // sent with every request over HTTP
	HeadersEnv     map[string]string // header name → the environment variable holding its value (see HTTPProviderSpec)
	Impact         map[string]string
	ConnectTimeout time.Duration
	CallTimeout    time.Duration
}

// Tool is a tool declared in configuration (built-in tools need none).
type Tool struct {
	Name                 string
	Description          string
	Impact               string // read | internal | external
	Risk                 string // low | medium | high
	RequiresConfirmation bool
	// Idempotent says a second call with the same arguments changes
	// nothing more (told to MCP clients as idempotentHint).
	Idempotent bool
	// InputSchema is the JSON Schema of the tool's arguments, an object
	// schema; {"type": "object"} when the file gives none.
	InputSchema map[string]any
	Timeout     time.Duration                // how long a call may run; 0 means the gate's default
	HTTP        *agentplane.HTTPProviderSpec // POST target; nil for other transports
	// Program names the implementation the program running the
	// configuration supplies in code (Options.Programs); "" for other
	// transports.
	Program string
}

// Router holds the router settings.
type Router struct {
	Fillers         []string      // politeness phrases that may surround a trigger
	PickerTTL       time.Duration // how long a pending picker waits
	ConfirmationTTL time.Duration // how long a pending confirmation waits
	MaxOptions      int           // most candidates a question lists
	// ExampleThreshold is the confidence (0..1] a command recognised from
	// its examples must reach; below it the turn goes to the LLM.
	ExampleThreshold float64
	// NegativeExamples are utterances that ask for no command: a model
	// trained on the commands' examples learns them as a class of their
	// own, so turns nearest to them go to the LLM and the confidence of
	// any command is measured against them.
	NegativeExamples []string
}

// Router defaults.
const (
	DefaultPickerTTL       = 10 * time.Minute
	DefaultConfirmationTTL = 5 * time.Minute
	DefaultMaxOptions      = 5
	// DefaultExampleThreshold is the example confidence threshold tuned on
	// CLINC150's validation splits by bench/clinc150 (0.195), rounded.
	DefaultExampleThreshold = 0.2
)

// Options tell the validator what exists outside the file.
type Options struct {
	// Providers are the names of the code-backed resolver providers the
	// program registers; commands and toolboxes may name only these.
	Providers []string
	// Tools are names of tools registered in code besides
	// agentplane.BuiltinTools.
	Tools []string
	// Programs are the names of the tool implementations the program
	// supplies in code, which declared tools may name (tools[].program).
	Programs []string
}

// Problem is one thing wrong with a configuration.
type Problem struct {
	File string // file name, "" when parsed from bytes without one
	Line int    // 1-based line, 0 when unknown
	Path string // e.g. commands[2].resolver.catalog
	Msg  string
}

// String returns "file:line: path: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(":")
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:", p.Line)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is the error Parse returns: every problem found, in file order.
type Problems []Problem

// Error lists the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// MaxBytes is the largest configuration file accepted.
const MaxBytes = 64 << 20

// Load reads and parses the file at path.
func Load(path string, opts *Options) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration %s: %w", path, err)
	}
	return Parse(data, path, opts)
}

// Parse parses and validates a configuration. name is used in problem
// reports. The error, when not nil, is Problems.
func Parse(data []byte, name string, opts *Options) (*Config, error) {
	if opts == nil {
		opts = &Options{}
	}
	var probs Problems
	if p, bad := checkText(data); bad {
		p.File = name
		return nil, Problems{p}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		probs = append(probs, Problem{File: name, Line: yamlErrorLine(err), Msg: "invalid YAML: " + cleanYAMLError(err)})
		return nil, probs
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		probs = append(probs, Problem{File: name, Line: extra.Line, Msg: "a second YAML document: a configuration is one document (remove the --- before it, or merge them)"})
		return nil, probs
	}
	var f file
	d := &decoder{probs: &probs, lines: map[string]int{}, budget: max(10*countNodes(&root), minBudget)}
	d.decode(&root, reflect.ValueOf(&f).Elem(), "")
	if d.budget < 0 {
		for i := range probs {
			probs[i].File = name
		}
		return nil, probs
	}
	v := &validator{f: &f, opts: opts, lines: d.lines, probs: &probs}
	cfg := v.validate()
	for i := range probs {
		probs[i].File = name
		if probs[i].Line == 0 {
			probs[i].Line = v.lineOf(probs[i].Path)
		}
	}
	if len(probs) > 0 {
		sortProblems(probs)
		return nil, probs
	}
	return cfg, nil
}

// checkText refuses what is not YAML text before the YAML parser sees it:
// an empty file, a file over MaxBytes, UTF-16, invalid UTF-8 (with its line).
func checkText(data []byte) (Problem, bool) {
	switch {
	case len(data) > MaxBytes:
		return Problem{Msg: fmt.Sprintf("the file is over %d bytes", MaxBytes)}, true
	case len(bytes.TrimSpace(data)) == 0:
		return Problem{Msg: "the file is empty: a configuration needs at least one mode (see agentplane validate on the demo)"}, true
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}), bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		return Problem{Line: 1, Msg: "the file is UTF-16: save it as UTF-8"}, true
	}
	if !utf8.Valid(data) {
		line, col := 1, 1
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return Problem{Line: line, Msg: fmt.Sprintf("invalid UTF-8 (byte %#02x at column %d): save the file as UTF-8", data[i], col)}, true
			}
			if r == '\n' {
				line, col = line+1, 0
			}
			col++
			i += n
		}
	}
	return Problem{}, false
}

// countNodes counts a document's nodes without following aliases.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

func sortProblems(ps Problems) {
	// stable insertion sort by line: files are small
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Line < ps[j-1].Line; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func yamlErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(cleanYAMLError(err), "line %d:", &line); scanErr == nil {
		return line
	}
	return 0
}

// Mode returns the mode with the key.
func (c *Config) Mode(key string) (*agentplane.Mode, bool) {
	for i := range c.Modes {
		if c.Modes[i].Key == key {
			return &c.Modes[i], true
		}
	}
	return nil, false
}

// DefaultMode returns the default mode.
func (c *Config) DefaultMode() *agentplane.Mode {
	for i := range c.Modes {
		if c.Modes[i].Default {
			return &c.Modes[i]
		}
	}
	return &c.Modes[0] // unreachable for a validated configuration
}

// ModesCatalog returns the built-in catalog of modes: one item per mode,
// with the mode key as id.
func (c *Config) ModesCatalog() agentplane.Catalog {
	cat := agentplane.Catalog{ID: agentplane.ModesCatalog, DisplayName: "Modes", EntityType: "mode"}
	for _, m := range c.Modes {
		cat.Items = append(cat.Items, agentplane.ResolverItem{
			Header:      agentplane.EntityHeader{ID: m.Key, DisplayName: m.DisplayName},
			Description: m.Description,
			Aliases:     m.Aliases,
		})
	}
	return cat
}
