package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/mcpclient"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
)

// Main is the agentplane program, with its standard streams and clock
// injected so tests run it in-process.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Now    func() time.Time    // nil means time.Now
	Getenv func(string) string // nil means os.Getenv
}

const usage = `agentplane — the control plane between a person, an LLM and tools

Usage:
  agentplane chat     [--config FILE] [--db DB] [--session ID] [--mode KEY] [--trace] [--audit-file FILE]
                                                                terminal chat; --session resumes a stored one
  agentplane route    [--config FILE]                           JSON lines in, decisions out
  agentplane validate [--config FILE]                           check a configuration
  agentplane test     [--config FILE] FILE.yaml...              run conversation test files
  agentplane replay   [--config FILE] LOG.jsonl                 re-run recorded sessions, print divergences
  agentplane audit verify FILE                                  check the hash chains of an audit log
  agentplane audit export [--db DB] --session ID                a stored session's chain as JSON Lines
  agentplane tools list [--config FILE] [--mode KEY]            the active tools, impact and schema
  agentplane tools call [--config FILE] [--mode KEY] NAME ARGS  run one through the gate, print the result

Without --config, the embedded demo configuration (a sales assistant) is used.
`

// Run runs the command line args and returns the exit status: 0 success,
// 1 failure (invalid configuration, a failed input line), 2 usage error.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Now == nil {
		m.Now = time.Now
	}
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "chat":
		return m.chat(ctx, args[1:])
	case "route":
		return m.route(ctx, args[1:])
	case "validate":
		return m.validate(args[1:])
	case "audit":
		return m.audit(ctx, args[1:])
	case "test":
		return m.test(ctx, args[1:])
	case "replay":
		return m.replay(ctx, args[1:])
	case "tools":
		return m.toolsCmd(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return 0
	}
	fmt.Fprintf(m.Stderr, "agentplane: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func (m *Main) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("agentplane "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	return fs
}

// parse parses flags; it returns the exit status to use when parsing ended
// the run (help or a bad flag).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// loadConfig loads the configuration file, or the embedded demo when path
// is empty.
func loadConfig(path string, opts *router.Options) (*config.Config, string, error) {
	co := opts.ConfigOptions()
	co.Tools = codeTools
	if path == "" {
		cfg, err := demo.Config(co)
		return cfg, demo.Name, err
	}
	cfg, err := config.Load(path, co)
	return cfg, path, err
}

// DefaultDB is the database used when neither --db nor $AGENTPLANE_DB
// says otherwise.
const DefaultDB = ".agentplane/agentplane.db"

// dbFlag adds --db to fs: a SQLite file path or a postgres:// URL.
func (m *Main) dbFlag(fs *flag.FlagSet) *string {
	def := m.Getenv("AGENTPLANE_DB")
	if def == "" {
		def = DefaultDB
	}
	return fs.String("db", def, "database: a SQLite file or a postgres:// URL (default $AGENTPLANE_DB, else "+DefaultDB+")")
}

// stateStore is what commands that keep state need from a store.
type stateStore interface {
	gate.Store
	Records(ctx context.Context, session string) ([]audit.Record, error)
}

// openStore opens the database named by --db, printing a problem. The
// caller defers the returned close.
func (m *Main) openStore(db string) (stateStore, func(), bool) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		s, err := postgres.Open(context.Background(), db)
		if err != nil {
			fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
			return nil, nil, false
		}
		return s, s.Close, true
	}
	s, err := sqlite.Open(db, nil)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return nil, nil, false
	}
	return s, func() { s.Close() }, true
}

// codeTools are the tools this binary provides in code; configurations may
// put them in toolboxes without declaring them.
var codeTools = append(append([]string(nil), tool.BuiltinNames...), demo.ToolNames...)

// toolSet is the tools a command runs with, and the MCP servers they came
// from.
type toolSet struct {
	*tool.Registry
	mcp     []*mcpclient.Server
	stop    context.CancelFunc // stops the retries of servers that were down
	retries sync.WaitGroup
}

// mcpRetryInterval is how often a server that was down at start is tried.
const mcpRetryInterval = 5 * time.Second

// Close stops the retries and closes the connections to the MCP servers.
func (ts *toolSet) Close() {
	ts.stop()
	ts.retries.Wait()
	for _, s := range ts.mcp {
		s.Close()
	}
}

// toolRegistry builds the tools: the binary's own, the configuration's HTTP
// tools and the tools of its MCP servers. The caller closes the set.
func toolRegistry(rr *router.Registry, now func() time.Time) (*toolSet, error) {
	cfg := rr.Config()
	reg := tool.NewRegistry()
	tools := append([]tool.Tool{tool.ListModes(tool.ConfigModes(cfg), nil), tool.GetContext(), tool.CatalogSearch(rr), demo.NewOutbox(now).Tool()},
		tool.EffectTools()...)
	declared, err := tool.FromConfig(cfg, nil)
	if err != nil {
		return nil, err
	}
	for _, t := range append(tools, declared...) {
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	ts := &toolSet{Registry: reg, stop: stop}
	// MCP servers: mounted without blocking start-up for long; a server
	// that is down now says so, and is tried again in the background until
	// it comes up and its tools are mounted.
	for _, m := range cfg.MCPServers {
		impact := map[string]tool.Impact{}
		for k, v := range m.Impact {
			impact[k] = tool.Impact(v)
		}
		srv := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: m.Name, Prefix: m.Prefix, Command: m.Command, URL: m.URL,
			Impact: impact, ConnectTimeout: m.ConnectTimeout, CallTimeout: m.CallTimeout})
		ts.mcp = append(ts.mcp, srv)
		mount := func(tools []tool.Tool) {
			for _, t := range tools {
				if err := reg.Register(t); err != nil {
					slog.Warn("MCP tool not mounted", "server", m.Name, "err", err)
				}
			}
		}
		if h := srv.Health(); !h.Up {
			slog.Warn("MCP server is down; its tools are mounted when it comes up", "server", m.Name, "err", h.Error)
			ts.retries.Go(func() {
				srv.Retry(ctx, mcpRetryInterval, func(tools []tool.Tool) {
					mount(tools)
					slog.Info("MCP server is up; its tools are mounted", "server", m.Name, "tools", len(tools))
				})
			})
			continue
		}
		mount(srv.Tools())
	}
	return ts, nil
}

// load loads the configuration and builds its router registry and tools,
// printing any problem. The caller closes the tool set.
func (m *Main) load(path string) (*router.Registry, *toolSet, bool) {
	reg, ok := m.registry(path)
	if !ok {
		return nil, nil, false
	}
	ts, err := toolRegistry(reg, m.Now)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return nil, nil, false
	}
	return reg, ts, true
}

// registry loads a configuration and compiles it, printing problems.
func (m *Main) registry(path string) (*router.Registry, bool) {
	opts := &router.Options{Now: m.Now}
	cfg, name, err := loadConfig(path, opts)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: invalid configuration %s:\n%v\n", name, err)
		return nil, false
	}
	reg, err := router.NewRegistry(cfg, opts)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %s: %v\n", name, err)
		return nil, false
	}
	return reg, true
}

func (m *Main) validate(args []string) int {
	fs := m.flags("validate")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, name, err := loadConfig(*path, &router.Options{})
	if err != nil {
		var probs config.Problems
		if errors.As(err, &probs) {
			for _, p := range probs {
				fmt.Fprintln(m.Stdout, p)
			}
			fmt.Fprintf(m.Stdout, "%s: %d problem(s)\n", name, len(probs))
		} else {
			fmt.Fprintf(m.Stdout, "%v\n", err)
		}
		return 1
	}
	if _, err := router.NewRegistry(cfg, &router.Options{}); err != nil {
		fmt.Fprintf(m.Stdout, "%s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(m.Stdout, "%s: valid (%d modes, %d toolboxes, %d catalogs, %d commands, %d tools)\n",
		name, len(cfg.Modes), len(cfg.Toolboxes), len(cfg.Catalogs), len(cfg.Commands), len(cfg.Tools))
	return 0
}
