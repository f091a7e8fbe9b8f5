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
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/workflow"
)

// Main is the agentplane program, with its standard streams and clock
// injected so tests run it in-process.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Now    func() time.Time    // nil means time.Now
	Getenv func(string) string // nil means os.Getenv
	Logger *slog.Logger        // nil means text to Stderr, warnings and up
}

const usage = `agentplane — the control plane between a person, an LLM and tools

Usage:
  agentplane serve    [--config FILE] [--db DB] [--addr HOST:PORT] [--drain-timeout D] [--log-level L]
                                                                the HTTP API, event streams and metrics
                                                                (default 127.0.0.1:8080)
  agentplane mcp      [--config FILE] [--db DB]                 an MCP server over stdio (one session, the local user)
  agentplane notify   send|list|show|ack|dead [flags]           the notification ledger (agentplane notify for help)
  agentplane workflow validate [--config FILE] FILE             every problem of a workflow definition, with its line
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
  agentplane probe    [--config FILE] [--trace]                 utterances that must not act, made from the
                                                                configuration: list any that would

Without --config, the embedded demo configuration (a sales assistant) is used.
DB is a SQLite file path or a postgres:// URL (default $AGENTPLANE_DB, else .agentplane/agentplane.db).
`

// principal is who the terminal's user is to the gate and the audit log.
const principal = agentplane.LocalPrincipal

// Run runs the command line args and returns the exit status: 0 success,
// 1 failure (invalid configuration, a failed input line, a store that
// failed), 2 usage error, 130 interrupted.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Now == nil {
		m.Now = time.Now
	}
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if m.Logger == nil {
		m.Logger = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return m.serve(ctx, args[1:])
	case "mcp":
		return m.mcp(ctx, args[1:])
	case "notify":
		return m.notifyCmd(ctx, args[1:])
	case "workflow":
		return m.workflowCmd(ctx, args[1:])
	case "chat":
		return m.chat(ctx, args[1:])
	case "route":
		return m.route(ctx, args[1:])
	case "validate":
		return m.validate(ctx, args[1:])
	case "audit":
		return m.audit(ctx, args[1:])
	case "test":
		return m.test(ctx, args[1:])
	case "replay":
		return m.replay(ctx, args[1:])
	case "tools":
		return m.toolsCmd(ctx, args[1:])
	case "probe":
		return m.probe(ctx, args[1:])
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

// parse parses flags and refuses positional arguments; it returns the exit
// status to use when parsing ended the run (help or a bad flag).
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

// source is the configuration to load: the file, or the embedded demo.
func source(path string) core.Source {
	if path == "" {
		return core.Source{YAML: demo.YAML, Name: demo.Name}
	}
	return core.Source{Path: path}
}

// options are the core options of a command: the demo's send tool only
// for the demo configuration, the clock, the logger.
func (m *Main) options(path string, st store.Store) *core.Options {
	o := &core.Options{Store: st, Now: m.Now, Logger: m.Logger}
	if path == "" {
		o.Tools = demo.Tools(m.Now)
	}
	return o
}

// load builds the runtime for a command over the store (nil: in memory),
// printing any problem. The caller closes the core, which closes the store.
func (m *Main) load(ctx context.Context, path string, st store.Store) (*core.Core, bool) {
	return m.loadWith(ctx, path, m.options(path, st))
}

// loadWith is load with the core options given (options, changed).
func (m *Main) loadWith(ctx context.Context, path string, opts *core.Options) (*core.Core, bool) {
	c, err := core.New(ctx, source(path), opts)
	if err != nil {
		if opts.Store != nil {
			opts.Store.Close()
		}
		var probs config.Problems
		if errors.As(err, &probs) {
			fmt.Fprintf(m.Stderr, "agentplane: invalid configuration %s:\n%v\n", source(path), err)
		} else {
			fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		}
		return nil, false
	}
	return c, true
}

// DefaultDB is the database used when neither --db nor $AGENTPLANE_DB
// says otherwise.
const DefaultDB = ".agentplane/agentplane.db"

// dbFlag adds --db to fs: a SQLite file or a postgres:// URL.
func (m *Main) dbFlag(fs *flag.FlagSet) *string {
	def := m.Getenv("AGENTPLANE_DB")
	if def == "" {
		def = DefaultDB
	}
	return fs.String("db", def, "database: a SQLite file or a postgres:// URL (default $AGENTPLANE_DB, else "+DefaultDB+")")
}

// isPostgres reports whether db names a PostgreSQL database.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// shownDB is how messages name a database: never with a password.
func shownDB(db string) string {
	if isPostgres(db) {
		return postgres.Redact(db)
	}
	return db
}

// openStore opens the database named by --db, printing a problem. A
// read-only open creates and migrates nothing.
func (m *Main) openStore(ctx context.Context, db string, readOnly bool) (store.Store, bool) {
	var st store.Store
	var err error
	exts := extensions // the subsystems' tables
	switch {
	case isPostgres(db):
		st, err = postgres.Open(ctx, db, &postgres.Options{Extensions: exts})
	case readOnly:
		st, err = sqlite.Open(ctx, db, &sqlite.Options{ReadOnly: true})
	default:
		st, err = sqlite.Open(ctx, db, &sqlite.Options{Extensions: exts})
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return nil, false
	}
	return st, true
}

// extensions are the subsystems' tables every store is opened with.
var extensions = []store.Extension{notify.Extension, workflow.Extension}

// memory is the store of commands that keep nothing.
func memory() store.Store { return memstore.New() }

func (m *Main) validate(ctx context.Context, args []string) int {
	fs := m.flags("validate")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	src := source(*path)
	opts := m.options(*path, memory())
	opts.SkipMCP = true
	c, err := core.New(ctx, src, opts)
	if err != nil {
		var probs config.Problems
		if errors.As(err, &probs) {
			for _, p := range probs {
				fmt.Fprintln(m.Stdout, p)
			}
			fmt.Fprintf(m.Stdout, "%s: %d problem(s)\n", src, len(probs))
		} else {
			fmt.Fprintf(m.Stdout, "%v\n", err)
		}
		return 1
	}
	defer c.Close()
	cfg := c.Config()
	fmt.Fprintf(m.Stdout, "%s: valid (%d modes, %d toolboxes, %d catalogs, %d commands, %d tools)\n",
		src, len(cfg.Modes), len(cfg.Toolboxes), len(cfg.Catalogs), len(cfg.Commands), len(cfg.Tools))
	// the LLM endpoint, when one is configured: its key, its reachability, its model
	s, ok, err := llm.FromEnv(cfg.LLM, m.Getenv)
	if err == nil && ok {
		err = llm.NewOpenAI(s, nil).Check(ctx)
	}
	if err != nil {
		fmt.Fprintln(m.Stdout, err)
		return 1
	}
	if ok {
		fmt.Fprintf(m.Stdout, "llm: %s serves %s\n", s.BaseURL, s.Model)
	}
	return 0
}

// agent returns the LLM connection the configuration and the environment
// set up (nil when none), printing a problem: a key variable that is not
// set stops the command; an endpoint that does not answer, or does not
// serve the model, is a warning (its turns fail clearly until it does).
func (m *Main) agent(ctx context.Context, c *core.Core) (*llm.Agent, bool) {
	s, ok, err := llm.FromEnv(c.Config().LLM, m.Getenv)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %s: %v\n", c.Name(), err)
		return nil, false
	}
	if !ok {
		return nil, true
	}
	model := llm.NewOpenAI(s, nil)
	if err := model.Check(ctx); err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: warning: %v; LLM turns fail until it answers\n", err)
	}
	return llm.New(c, model, s.LLM), true
}
