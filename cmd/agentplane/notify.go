package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
)

// notifyVerbs are the subcommands of `agentplane notify`, each with its
// own flags.
var notifyVerbs = []verb{
	{"send", "--user U --title T [--address USER|SESSION] [--session S] [--target USER|AGENT] [--handler SYSTEM|AGENT] [--body B] [--dedup K] [--ttl SECONDS] [--urgency U] [--directive D]"},
	{"list", "--user U [--channel A|B|C] [--limit N]"},
	{"show", "ID"},
	{"ack", "--user U ID"},
	{"dead", "[--limit N]"},
}

// notifyCmd emits, lists, shows and acknowledges notifications in the
// database's ledger, printing JSON with the API's field names (a list
// with nothing in it is []).
func (m *Main) notifyCmd(ctx context.Context, args []string) error {
	verb, use, err := subcommand("notify", notifyVerbs, args, " [--config FILE] [--db DB]")
	if err != nil {
		return err
	}
	fs := m.flags("notify "+verb, use+" [--config FILE] [--db DB]")
	c := m.commonFlags(fs, true)
	var n notify.Notification
	var user, channel *string
	limit := 50
	switch verb {
	case "send":
		user = fs.String("user", "", "the user the notification is for (required)")
		fs.StringVar((*string)(&n.Address), "address", "USER", "USER or SESSION")
		fs.StringVar(&n.SessionID, "session", "", "the session (address SESSION)")
		fs.StringVar((*string)(&n.Target), "target", "USER", "USER or AGENT")
		fs.StringVar((*string)(&n.Handler), "handler", "SYSTEM", "SYSTEM or AGENT")
		fs.StringVar(&n.Title, "title", "", "the title (required)")
		fs.StringVar(&n.Body, "body", "", "the body")
		fs.StringVar(&n.DedupKey, "dedup", "", "a deduplication key")
		fs.IntVar(&n.TTLSeconds, "ttl", 0, "seconds the agent may hold it")
		fs.StringVar((*string)(&n.Urgency), "urgency", "", "LOW, NORMAL, HIGH or CRITICAL")
		fs.StringVar(&n.Directive, "directive", "", "instructions for the agent")
	case "list":
		user = fs.String("user", "", "whose notifications (required)")
		channel = fs.String("channel", "", "A, B or C (default: all)")
		fs.IntVar(&limit, "limit", 50, "at most this many, newest first (at most 500)")
	case "ack":
		user = fs.String("user", "", "the user acknowledging it (required)")
	case "dead":
		fs.IntVar(&limit, "limit", 50, "at most this many, newest first (at most 500)")
	}
	ids := 0
	if verb == "show" || verb == "ack" {
		ids = 1
	}
	if err := parse(fs, args[1:], ids, ids); err != nil {
		return err
	}
	if user != nil && *user == "" {
		fs.Usage()
		return usagef("notify %s needs --user", verb)
	}
	if limit < 1 || limit > 500 {
		return usagef("--limit %d: want 1 to 500", limit)
	}
	rt, err := m.open(ctx, c, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	if rt.Bus == nil {
		return fmt.Errorf("notifications are kept in a database: %s keeps none", rt.DB)
	}
	l := rt.Bus.Ledger()
	var out any
	switch verb {
	case "send":
		n.UserID = *user
		out, err = rt.Bus.Emit(ctx, n, 0)
	case "list":
		out, err = nonNil(l.List(ctx, notify.Query{UserID: *user, Channel: notify.Channel(*channel), Limit: limit}))
	case "show":
		out, err = l.Get(ctx, fs.Arg(0))
	case "ack":
		out, err = l.Ack(ctx, fs.Arg(0), *user)
	case "dead":
		out, err = nonNil(l.Dead(ctx, limit))
	}
	if err != nil {
		return notify.Describe(err)
	}
	return printJSON(m.Stdout, out)
}

// nonNil makes a list that is nil an empty one: JSON [] rather than null.
func nonNil(list []notify.Notification, err error) ([]notify.Notification, error) {
	if list == nil {
		list = []notify.Notification{}
	}
	return list, err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
