package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/notify"
)

const notifyUsage = `Usage:
  agentplane notify send --user U --title T [--address USER|SESSION] [--session S] [--target USER|AGENT]
                         [--handler SYSTEM|AGENT] [--body B] [--dedup K] [--ttl SECONDS] [--urgency U] [--directive D] [--db DB]
  agentplane notify list --user U [--channel A|B|C] [--db DB]
  agentplane notify show ID [--db DB]
  agentplane notify ack ID --user U [--db DB]
  agentplane notify dead [--db DB]
Each prints JSON: the notification(s), with their channel and state in the ledger.
`

// notifyCmd emits, lists, shows and acknowledges notifications in the
// database's ledger.
func (m *Main) notifyCmd(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, notifyUsage)
		return 2
	}
	verb := args[0]
	fs := m.flags("notify " + verb)
	db := m.dbFlag(fs)
	user := fs.String("user", "", "the user the notification is for (send, list, ack)")
	var n notify.Notification
	fs.StringVar((*string)(&n.Address), "address", "USER", "USER or SESSION")
	fs.StringVar(&n.SessionID, "session", "", "the session (address SESSION)")
	fs.StringVar((*string)(&n.Target), "target", "USER", "USER or AGENT")
	fs.StringVar((*string)(&n.Handler), "handler", "SYSTEM", "SYSTEM or AGENT")
	fs.StringVar(&n.Title, "title", "", "the title")
	fs.StringVar(&n.Body, "body", "", "the body")
	fs.StringVar(&n.DedupKey, "dedup", "", "a deduplication key")
	fs.IntVar(&n.TTLSeconds, "ttl", 0, "seconds the agent may hold it")
	fs.StringVar((*string)(&n.Urgency), "urgency", "", "LOW, NORMAL, HIGH or CRITICAL")
	fs.StringVar(&n.Directive, "directive", "", "instructions for the agent")
	channel := fs.String("channel", "", "A, B or C (list)")
	rest, id := args[1:], ""
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") { // the id, before the flags
		id, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if id == "" {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprint(m.Stderr, notifyUsage)
		return 2
	}
	positional := fs.NArg()
	if id != "" {
		positional = 1
	}
	st, ok := m.openStore(ctx, *db, false)
	if !ok {
		return 1
	}
	c, ok := m.load(ctx, "", st)
	if !ok {
		return 1
	}
	defer c.Close()
	l, err := notify.NewLedger(st, nil)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	bus := notify.NewBus(l, c, events.NewHub(st.Records, nil))
	var out any
	switch {
	case verb == "send" && positional == 0:
		n.UserID = *user
		out, err = bus.Emit(ctx, n, 0)
	case verb == "list" && positional == 0 && *user != "":
		out, err = l.List(ctx, notify.Query{UserID: *user, Channel: notify.Channel(*channel), Limit: 500})
	case verb == "show" && positional == 1:
		out, err = l.Get(ctx, id)
	case verb == "ack" && positional == 1 && *user != "":
		out, err = l.Ack(ctx, id, *user)
	case verb == "dead" && positional == 0:
		out, err = l.Dead(ctx, 500)
	default:
		fmt.Fprint(m.Stderr, notifyUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", notify.Describe(err))
		return 1
	}
	return printJSON(m.Stdout, out)
}

func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}
