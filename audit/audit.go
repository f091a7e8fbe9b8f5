// Package audit is the append-only, hash-chained log of everything that
// happens in a session: every turn's input, the router's decision with its
// trace, and the execution result with its state diff.
//
// Each record carries the hash of the previous record of its session, so an
// edited, dropped or reordered record breaks the chain and Verify finds it:
//
//	log := audit.NewMemory()
//	log.Append(ctx, &audit.Record{Session: "s1", Kind: audit.KindTurn, ...})
//	recs, _ := log.Records(ctx, "s1")
//	err := audit.Verify(recs) // nil for an intact chain
//
// The JSONL form written by File is also the export format.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane"
)

// Record kinds.
const (
	KindOpen      = "open"      // a session was opened; State is its first state
	KindTurn      = "turn"      // a user turn: input and decision, and intent and result when it invoked something
	KindExecution = "execution" // an invocation that did not come from a turn (LLM, MCP, API, workflow)
)

// Record is one entry of a session's audit log.
type Record struct {
	Session string    `json:"session"`
	Seq     int64     `json:"seq"` // 1, 2, … within the session
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`

	Input    *agentplane.TurnInput `json:"input,omitempty"`
	Decision *agentplane.Decision  `json:"decision,omitempty"`
	Intent   *agentplane.Intent    `json:"intent,omitempty"`
	// Roles are the principal's roles for an execution that is not a turn
	// (a turn's are in Input), so replay runs it as the same principal.
	Roles  []string                    `json:"roles,omitempty"`
	Result *agentplane.ExecutionResult `json:"result,omitempty"`
	// State is the session after the record's event.
	State *agentplane.Session `json:"state,omitempty"`

	Prev string `json:"prev"` // hash of the session's previous record, "" for the first
	Hash string `json:"hash"` // SHA-256 of the record's JSON with Hash empty
}

// ComputeHash returns the hash the record should carry: SHA-256, in hex,
// of its JSON encoding with Hash empty.
func (r *Record) ComputeHash() (string, error) {
	c := *r
	c.Hash = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("audit: encode record %s/%d: %w", r.Session, r.Seq, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Seal sets r's sequence number and chain fields to follow the record with
// sequence number prevSeq and hash prevHash (0 and "" for a first record),
// and computes its hash. Stores call it when they append.
func Seal(r *Record, prevSeq int64, prevHash string) error {
	r.Seq, r.Prev = prevSeq+1, prevHash
	h, err := r.ComputeHash()
	if err != nil {
		return err
	}
	r.Hash = h
	return nil
}

// Log is an append-only audit log. Implementations are safe for concurrent
// use; appends to one session are serialized.
type Log interface {
	// Append seals r (Seq, Prev, Hash) after the session's last record and
	// stores it. It fails, storing nothing, when the record cannot be
	// encoded or stored.
	Append(ctx context.Context, r *Record) error
	// Records returns the session's records in order.
	Records(ctx context.Context, session string) ([]Record, error)
}

// ChainError says where a chain breaks.
type ChainError struct {
	Session string
	Index   int   // position of the bad record in the slice (0-based)
	Seq     int64 // the bad record's sequence number as stored
	Reason  string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("session %s, record %d (seq %d): %s", e.Session, e.Index+1, e.Seq, e.Reason)
}

// Verify checks one session's records: sequence numbers 1, 2, … without
// gaps, each record's Prev equal to the previous record's Hash, and each
// Hash equal to the record's recomputed hash. It returns a *ChainError for
// the first bad record.
func Verify(recs []Record) error {
	var prev string
	for i := range recs {
		r := &recs[i]
		bad := func(format string, args ...any) error {
			return &ChainError{Session: r.Session, Index: i, Seq: r.Seq, Reason: fmt.Sprintf(format, args...)}
		}
		if i > 0 && r.Session != recs[0].Session {
			return bad("belongs to session %s, not %s", r.Session, recs[0].Session)
		}
		if r.Seq != int64(i+1) {
			return bad("sequence number %d where %d was expected: a record was dropped, added or reordered", r.Seq, i+1)
		}
		if r.Prev != prev {
			return bad("does not follow the previous record's hash: a record was dropped, added or reordered")
		}
		h, err := r.ComputeHash()
		if err != nil {
			return bad("%v", err)
		}
		if h != r.Hash {
			return bad("hash mismatch: the record was edited")
		}
		prev = r.Hash
	}
	return nil
}

// Rows is a result set of one JSON record per row; database/sql's and
// pgx's rows both are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// DecodeRows reads the records of rows in order, the stores' reading
// side. The error names the first row that is not a record.
func DecodeRows(rows Rows) ([]Record, error) {
	var out []Record
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		var r Record
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return nil, fmt.Errorf("record %d is corrupt: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
