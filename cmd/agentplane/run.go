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

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
)

// Main is the agentplane program, with its standard streams and clock
// injected so tests run it in-process. Each command returns an error; Run
// prints it and maps it to the exit status in one place.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Now    func() time.Time    // nil means time.Now
	Getenv func(string) string // nil means os.Getenv
	Logger *slog.Logger        // nil means warnings and up to Stderr, for a person to read
}

// command is one of agentplane's commands: how it is called, what it
// does, and what runs it.
type command struct {
	name, args, what string
	run              func(m *Main, ctx context.Context, args []string) error
}

// commands are agentplane's commands, in the order help lists them.
var commands = []command{
	{"serve", "[--config FILE] [--db DB] [--addr HOST:PORT] [flags]", "the HTTP API, event streams, MCP and the web page", (*Main).serve},
	{"chat", "[--config FILE] [--db DB] [--session ID] [--mode KEY] [--trace] [--audit-file FILE]", "terminal chat; --session resumes a stored one", (*Main).chat},
	{"mcp", "[--config FILE] [--db DB]", "an MCP server over stdio (one session, the local user)", (*Main).mcp},
	{"route", "[--config FILE]", "JSON lines in, decisions out", (*Main).route},
	{"validate", "[--config FILE]", "check a configuration", (*Main).validate},
	{"test", "[--config FILE] FILE.yaml...", "run conversation test files", (*Main).test},
	{"probe", "[--config FILE] [--trace]", "utterances that must not act, made from the configuration: list any that would", (*Main).probe},
	{"eval", "[--config FILE] [--min-accuracy F] [--trace] FILE.jsonl", "labelled utterances: per-command precision and recall, confusions, misses, thresholds", (*Main).eval},
	{"replay", "[--config FILE] LOG.jsonl", "re-run recorded sessions, print divergences", (*Main).replay},
	{"audit", "verify FILE | verify --db DB [--all | --session ID] | export [--db DB] --session ID", "check hash chains, in a file or a database; a stored session's chain as JSON Lines", (*Main).audit},
	{"tools", "list|call [--config FILE] [--mode KEY] [flags]", "the active tools; run one through the gate", (*Main).toolsCmd},
	{"notify", "send|list|show|ack|dead [--config FILE] [--db DB] [flags]", "the notification ledger", (*Main).notifyCmd},
	{"workflow", "validate|run|status|approve|continue|abort|resume [flags]", "workflows: check a definition, run one, answer its pauses", (*Main).workflowCmd},
	{"keygen", "", "a new random API key and its SHA-256 for auth.keys", (*Main).keygen},
	{"version", "", "this binary's version, commit and Go version", (*Main).version},
}

// verb is a subcommand (notify send, workflow run, …) and its arguments.
type verb struct{ name, args string }

// subcommand finds args[0] among a command's verbs and returns it with its
// arguments; none, or an unknown one, is a usage error listing them all
// (each with suffix, the flags they share).
func subcommand(command string, verbs []verb, args []string, suffix string) (name, use string, err error) {
	if len(args) > 0 {
		for _, v := range verbs {
			if v.name == args[0] {
				return v.name, v.args, nil
			}
		}
	}
	msg := command + ": a subcommand, one of"
	for _, v := range verbs {
		msg += fmt.Sprintf("\n  agentplane %s %s %s%s", command, v.name, v.args, suffix)
	}
	return "", "", usagef("%s", msg)
}

// usage is the help every command is listed in.
func usage() string {
	var b strings.Builder
	b.WriteString("agentplane — the control plane between a person, an LLM and tools\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  agentplane %-8s %s\n  %-19s %s\n", c.name, c.args, "", c.what)
	}
	b.WriteString(`
Run agentplane COMMAND --help for a command's flags.
Without --config, the embedded demo configuration (a sales assistant) is used.
DB is a SQLite file or a postgres:// URL (default $AGENTPLANE_DB, else ` + DefaultDB + `).
`)
	return b.String()
}

// principal is who the terminal's user is to the gate and the audit log.
const principal = agentplane.LocalPrincipal

// Run runs the command line and returns the exit status: 0 success, 1
// failure (an invalid configuration, a failed input line, a store that
// failed), 2 a usage error, 130 interrupted.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Now == nil {
		m.Now = time.Now
	}
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if m.Logger == nil {
		m.Logger = slog.New(&terminal{mu: &sync.Mutex{}, w: m.Stderr, level: slog.LevelWarn})
	}
	return m.exit(m.dispatch(ctx, args))
}

func (m *Main) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage())
		return exitCode(2)
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage())
		return nil
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(m, ctx, args[1:])
		}
	}
	fmt.Fprintf(m.Stderr, "agentplane: unknown command %q\n\n%s", args[0], usage())
	return exitCode(2)
}

// exitCode ends a run with a status whose reason was printed already.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a command line that cannot run: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// errInterrupted ends a command stopped by a signal: exit status 130.
var errInterrupted = errors.New("interrupted")

// configError is a configuration that does not load, with its name.
type configError struct {
	name  string
	probs config.Problems
}

func (e *configError) Error() string {
	return fmt.Sprintf("invalid configuration %s:\n%v", e.name, e.probs)
}

// exit prints err as a user reads it and returns the exit status.
func (m *Main) exit(err error) int {
	var code exitCode
	var use *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &use):
		fmt.Fprintf(m.Stderr, "agentplane: %s\n", use.msg)
		return 2
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(m.Stderr, "agentplane: interrupted")
		return 130
	}
	fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
	return 1
}

// flags returns a command's flag set; parse parses it.
func (m *Main) flags(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("agentplane "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentplane %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a command's flags, which may come before, between or after
// its positional arguments ("--" ends the flags), and checks that it got
// between least and most positional arguments (most < 0: any number).
// fs.Args() are the positional arguments afterwards.
func parse(fs *flag.FlagSet, args []string, least, most int) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return exitCode(2) // the flag package said what was wrong
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	fs.Parse(append([]string{"--"}, pos...)) // fs.Args() are the positional ones
	switch n := len(pos); {
	case n < least:
		fs.Usage()
		return exitCode(2)
	case most >= 0 && n > most:
		return usagef("unexpected argument %q", pos[most])
	}
	return nil
}

// common are the flags of every command that opens the runtime.
type common struct {
	config string
	db     string
}

// DefaultDB is the database used when neither --db nor $AGENTPLANE_DB
// says otherwise.
const DefaultDB = ".agentplane/agentplane.db"

// commonFlags adds --config, and --db when the command keeps anything.
func (m *Main) commonFlags(fs *flag.FlagSet, db bool) *common {
	c := m.dbFlag(fs, db)
	fs.StringVar(&c.config, "config", "", "configuration file (default: the embedded demo)")
	return c
}

// dbFlag adds --db when db is set.
func (m *Main) dbFlag(fs *flag.FlagSet, db bool) *common {
	c := &common{}
	if db {
		def := m.Getenv("AGENTPLANE_DB")
		if def == "" {
			def = DefaultDB
		}
		c.db = def
		fs.Var(dbValue{&c.db}, "db", "the database `DB`: a SQLite file or a postgres:// URL ($AGENTPLANE_DB)")
	}
	return c
}

// dbValue is --db: a SQLite file or a postgres:// URL, never empty (an
// empty one would keep everything in memory, and lose it, unasked).
type dbValue struct{ p *string }

func (v dbValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v dbValue) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("empty: want a SQLite file or a postgres:// URL (without --db: $AGENTPLANE_DB, else %s)", DefaultDB)
	}
	*v.p = s
	return nil
}

// source is the configuration to load: the file, or the embedded demo.
func source(path string) core.Source {
	if path == "" {
		return core.Source{YAML: demo.YAML, Name: demo.Name}
	}
	return core.Source{Path: path}
}

// programs gives the core the programs the binary ships (the demo's
// outbox, for any configuration), unless it has its own.
func (m *Main) programs(o *core.Options) {
	if o.Programs == nil {
		o.Programs = demo.Programs(m.Now)
	}
}

// open opens the runtime a command needs over its common flags (c.db ""
// keeps everything in memory); o adds what the command needs besides.
func (m *Main) open(ctx context.Context, c *common, o plane.Options) (*plane.Runtime, error) {
	o.Config, o.DB, o.OpenStore = source(c.config), c.db, drivers.Open // the command links the SQL drivers
	m.programs(&o.Core)
	o.Core.Now = m.Now
	if o.Getenv == nil {
		o.Getenv = m.Getenv
	}
	if o.Logger == nil {
		o.Logger = m.Logger
	}
	rt, err := plane.Open(ctx, o)
	var probs config.Problems
	if errors.As(err, &probs) {
		return nil, &configError{name: o.Config.String(), probs: probs}
	}
	return rt, err
}
