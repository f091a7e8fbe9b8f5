// Package notify is the Agentic Notification Protocol (ANP): a
// notification's three axes (address, target, handler) route it to exactly
// one channel at emission — A, the user's inbox; B, the conversation
// floor; C, the agent's context — and a durable ledger carries it through
// the states PENDING → DISPATCHED → LOCKED → (DELIVERED | ESCALATED →
// (DELIVERED | FAILED) | FAILED), every transition one compare-and-swap on
// (state, owner_lease) in the database, so nothing is lost, doubled or
// delivered by two owners.
package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane/internal/canonjson"
)

// Address is a notification's spatial boundary: whom it is kept for.
type Address string

// Addresses.
const (
	AddressUser    Address = "USER"    // a user, whatever the conversation
	AddressSession Address = "SESSION" // one conversation
)

// Target is who receives a notification first.
type Target string

// Targets.
const (
	TargetUser  Target = "USER"
	TargetAgent Target = "AGENT"
)

// Handler is who processes or presents a notification.
type Handler string

// Handlers.
const (
	HandlerSystem Handler = "SYSTEM"
	HandlerAgent  Handler = "AGENT"
)

// Channel is the one channel a notification is delivered on.
type Channel string

// Channels.
const (
	ChannelInbox Channel = "A" // the user's inbox: deterministic
	ChannelFloor Channel = "B" // the conversation floor (a system pill): deterministic
	ChannelAgent Channel = "C" // the agent's context: autonomous
)

// State is where a notification is in the ledger.
type State string

// States (§5.1). DELIVERED and FAILED are terminal.
const (
	StatePending    State = "PENDING"
	StateDispatched State = "DISPATCHED"
	StateLocked     State = "LOCKED"
	StateDelivered  State = "DELIVERED"
	StateEscalated  State = "ESCALATED"
	StateFailed     State = "FAILED"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool { return s == StateDelivered || s == StateFailed }

// Allowed reports whether the ledger may move a notification from one
// state to another (§5.1); LOCKED → LOCKED is a new owner taking over an
// expired lease.
func Allowed(from, to State) bool {
	switch from {
	case StatePending:
		return to == StateDispatched
	case StateDispatched:
		return to == StateLocked
	case StateLocked:
		return to == StateLocked || to == StateDelivered || to == StateEscalated || to == StateFailed
	case StateEscalated:
		return to == StateDelivered || to == StateFailed
	}
	return false
}

// Route is the §6 table: the one channel of a notification's axes. Every
// combination with Handler AGENT or Target AGENT is the agent's context;
// the others are the inbox (address USER) or the floor (address SESSION).
func Route(a Address, t Target, h Handler) (Channel, error) {
	switch {
	case a != AddressUser && a != AddressSession:
		return "", fmt.Errorf("address %q: want USER or SESSION", a)
	case t != TargetUser && t != TargetAgent:
		return "", fmt.Errorf("target %q: want USER or AGENT", t)
	case h != HandlerSystem && h != HandlerAgent:
		return "", fmt.Errorf("handler %q: want SYSTEM or AGENT", h)
	case h == HandlerAgent || t == TargetAgent:
		return ChannelAgent, nil
	case a == AddressUser:
		return ChannelInbox, nil
	}
	return ChannelFloor, nil
}

// Fallback is the deterministic channel an escalated notification goes to:
// the inbox for a user, the floor for a session.
func Fallback(a Address) Channel {
	if a == AddressSession {
		return ChannelFloor
	}
	return ChannelInbox
}

// Urgency is advisory: how a client may render a notification.
type Urgency string

// Urgencies.
const (
	UrgencyLow      Urgency = "LOW"
	UrgencyNormal   Urgency = "NORMAL"
	UrgencyHigh     Urgency = "HIGH"
	UrgencyCritical Urgency = "CRITICAL"
)

// Notification is one event of the protocol, as the ledger keeps it. The
// axes and the channel are fixed at emission (escalation re-routes the
// channel and promotes the target).
type Notification struct {
	ID        string          `json:"id"`
	Address   Address         `json:"address"`
	UserID    string          `json:"user_id"`              // whose it is (both addresses)
	SessionID string          `json:"session_id,omitempty"` // address SESSION
	Target    Target          `json:"target"`
	Handler   Handler         `json:"handler"`
	Title     string          `json:"title"`
	Body      string          `json:"body,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	DedupKey  string          `json:"deduplication_key,omitempty"`
	// Directive is agent_instructions.directive: guidance for the LLM
	// when the agent handles the notification.
	Directive  string    `json:"directive,omitempty"`
	TTLSeconds int       `json:"ttl_seconds,omitempty"` // how long the agent may hold it; 0: the default
	Urgency    Urgency   `json:"urgency,omitempty"`
	Seq        int64     `json:"seq"` // per address (user or session), in emission order
	Channel    Channel   `json:"channel"`
	State      State     `json:"state"`
	OwnerLease int64     `json:"owner_lease"` // the fencing counter: every claim increments it
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Attempts   int       `json:"attempts"` // claims made
	Shows      int       `json:"shows"`    // times an escalated notification was shown again, unacknowledged
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Limits of what a notification may carry.
const (
	MaxPayload   = 64 << 10
	MaxDedupKey  = 256
	MaxTitle     = 1 << 10
	MaxBody      = 16 << 10
	MaxDirective = 4 << 10
	MaxTTL       = 7 * 24 * 3600
)

// Validate checks an emitted notification and says what is wrong, naming
// the field: the axes, the address's ids, the sizes, the TTL, the
// payload's JSON.
func (n *Notification) Validate() error {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if _, err := Route(n.Address, n.Target, n.Handler); err != nil {
		bad("%v", err)
	}
	if strings.TrimSpace(n.UserID) == "" {
		bad("user_id: missing")
	}
	switch {
	case n.Address == AddressSession && n.SessionID == "":
		bad("session_id: missing (address SESSION)")
	case n.Address == AddressUser && n.SessionID != "":
		bad("session_id: only with address SESSION")
	}
	if strings.TrimSpace(n.Title) == "" {
		bad("title: missing")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"title", n.Title, MaxTitle}, {"body", n.Body, MaxBody}, {"directive", n.Directive, MaxDirective}, {"deduplication_key", n.DedupKey, MaxDedupKey}} {
		if len(f.v) > f.max {
			bad("%s: %d bytes; at most %d", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			bad("%s: not UTF-8", f.name)
		}
	}
	if len(n.Payload) > MaxPayload {
		bad("payload: %d bytes; at most %d", len(n.Payload), MaxPayload)
	} else if len(n.Payload) > 0 {
		if err := canonjson.Check(n.Payload); err != nil {
			bad("payload: %v", err) // what the audit log could not read back is never stored
		}
	}
	if n.TTLSeconds < 0 || n.TTLSeconds > MaxTTL {
		bad("ttl_seconds: %d; want 0 to %d", n.TTLSeconds, MaxTTL)
	}
	switch n.Urgency {
	case "", UrgencyLow, UrgencyNormal, UrgencyHigh, UrgencyCritical:
	default:
		bad("urgency %q: want LOW, NORMAL, HIGH or CRITICAL", n.Urgency)
	}
	if len(probs) > 0 {
		return &InvalidError{Problems: probs}
	}
	return nil
}

// InvalidError lists what is wrong with an emitted notification.
type InvalidError struct{ Problems []string }

func (e *InvalidError) Error() string { return "notification: " + strings.Join(e.Problems, "; ") }

// addressKey is the scope of a notification's sequence and dedup key.
func (n *Notification) addressKey() string {
	if n.Address == AddressSession {
		return sessionKey(n.SessionID)
	}
	return userKey(n.UserID)
}
