// Package audit is the append-only, hash-chained log of everything that
// happens in a session: every turn's input, the router's decision with its
// trace, and the execution result with its state diff.
//
// Each record carries the hash of the previous record of its session, so an
// edited, dropped or reordered record breaks the chain and Verify finds it.
// A record's hash is SHA-256 over its canonical JSON (RFC 8785) without the
// hash member, computed from the bytes as stored, never from a decoded Go
// value: a field added to a record type later does not change old hashes,
// and no decoding quirk (a member repeated, or repeated in another letter
// case) can show one value to a reader and another to the verifier.
//
//	err := audit.Seal(rec, prev.Seq, prev.Hash) // rec.Raw is the line to store
//	recs, _ := store.Records(ctx, "s1", 0)
//	err = audit.Verify(recs) // nil for an intact chain
//
// The JSON Lines form (one sealed record per line, sessions interleaved)
// is the export format; File writes it.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
)

// Record kinds.
const (
	KindOpen      = "open"      // a session was opened; State is its first state
	KindTurn      = "turn"      // a user turn: input and decision, and intent and result when it invoked something
	KindExecution = "execution" // an invocation that did not come from a turn (LLM, MCP, API, workflow)
	KindResume    = "resume"    // a stored session was fitted to a changed configuration; State is the result
	KindLLM       = "llm"       // one exchange with the LLM (LLM): messages sent, tools offered, the response
	KindProposal  = "proposal"  // a tool call the LLM proposed that needs the human's confirmation: now pending, with a token for the human
	KindNotice    = "notice"    // a notification shown on the conversation floor (Notice), in causal order with the turns
)

// Version is the record format this package writes. Records without a
// version (0) were written before formats were versioned; they verify by
// the rule of that time (see Verify).
const Version = 1

// Record is one entry of a session's audit log.
type Record struct {
	V       int       `json:"v,omitempty"` // the record format, Version
	Session string    `json:"session"`
	Seq     int64     `json:"seq"` // 1, 2, … within the session
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`

	// Principal is who acted (the user id behind an API key, "local" for
	// the terminal); Base is the session version the event was decided on,
	// so replay decides it on the same state even when another writer had
	// moved the session on.
	Principal string `json:"principal,omitempty"`
	Base      int64  `json:"base,omitempty"`
	// Config is the digest of the configuration in force when the event
	// was decided (config.Digest): replay decides it on the same one.
	// Records written before configurations were named have none.
	Config string `json:"config,omitempty"`

	Input    *agentplane.TurnInput `json:"input,omitempty"`
	Decision *agentplane.Decision  `json:"decision,omitempty"`
	Intent   *agentplane.Intent    `json:"intent,omitempty"`
	// Sources names the provider answers an event without a decision read
	// (an execution's checks: the item an API, MCP, LLM or workflow call
	// names, looked up in a catalog a provider serves), as
	// Decision.Sources does for a decision: the source → the answer's
	// version. Replay serves those answers. None when it read no provider.
	Sources map[string]string `json:"sources,omitempty"`
	// Roles are the principal's roles for an execution that is not a turn
	// (a turn's are in Input), so replay runs it as the same principal.
	Roles  []string                    `json:"roles,omitempty"`
	Result *agentplane.ExecutionResult `json:"result,omitempty"`
	// State is the session after the record's event.
	State *agentplane.Session `json:"state,omitempty"`
	// Issued is the SHA-256 digest of a confirmation token the event
	// issued, Presented of one it presented. Tokens are never recorded.
	Issued    string `json:"issued,omitempty"`
	Presented string `json:"presented,omitempty"`
	// Approval is the id of the human's approval a workflow's call ran
	// under (in place of a confirmation).
	Approval string `json:"approval,omitempty"`
	// Rebased is the session version a run's effects were applied to when
	// another writer had moved the session on from Base while its tool ran:
	// the run happened, so it is recorded with its effects on the state it
	// met (replay applies them to the same state).
	Rebased int64 `json:"rebased,omitempty"`
	// Notes say what a resume record changed and why.
	Notes []string `json:"notes,omitempty"`
	// LLM is the exchange an llm record holds.
	LLM *agentplane.LLMExchange `json:"llm,omitempty"`
	// Notice is the notification a notice record shows on the floor.
	Notice *agentplane.Notice `json:"notice,omitempty"`

	Prev string `json:"prev"` // hash of the session's previous record, "" for the first
	Hash string `json:"hash"` // SHA-256 of the record's canonical JSON without the hash

	// Raw is the record as stored, one line of JSON: what Verify hashes.
	// Seal sets it; readers (ReadJSONL, DecodeRows) keep it.
	Raw []byte `json:"-"`
}

// Seal sets r's version, sequence number and chain fields to follow the
// record with sequence number prevSeq and hash prevHash (0 and "" for a
// first record), computes its hash, and sets r.Raw to the line to store:
// the canonical JSON with the hash appended as the last member.
func Seal(r *Record, prevSeq int64, prevHash string) error {
	return SealEncoded(r, prevSeq, prevHash, Encoded{})
}

// Encoded is canonical JSON of a record's largest members made before it
// is sealed (Canonical of the value the record holds), nil where none was
// made: a store encodes a commit's new state and its result once, for
// their rows and for the record alike.
type Encoded struct {
	State  []byte // Canonical(r.State)
	Result []byte // Canonical(r.Result)
}

// Canonical is v's canonical JSON as a record holds it (RFC 8785, written
// from the Go value): the form Encoded carries.
func Canonical(v any) ([]byte, error) { return canonjson.AppendValue(nil, v, nil) }

// SealEncoded is Seal with members encoded already: it writes enc's bytes
// where it would encode the record's state and result, so the record's
// bytes and hash are Seal's when enc is what Canonical makes of them.
func SealEncoded(r *Record, prevSeq int64, prevHash string, enc Encoded) error {
	r.V, r.Seq, r.Prev, r.Hash = Version, prevSeq+1, prevHash, ""
	opts := &canonjson.Options{Omit: "hash"}
	if enc.State != nil || enc.Result != nil {
		opts.Encoded = []canonjson.Member{{Name: "state", JSON: enc.State}, {Name: "result", JSON: enc.Result}}
	}
	size := 1024
	if n := len(enc.State) + len(enc.Result) + 512; n > size {
		size = n
	}
	raw, err := canonjson.AppendValue(make([]byte, 0, size), r, opts)
	if err != nil {
		return fmt.Errorf("audit: encode record %s/%d: %w", r.Session, r.Seq, err)
	}
	sum := sha256.Sum256(raw)
	r.Hash = hex.EncodeToString(sum[:])
	raw = append(raw[:len(raw)-1], `,"hash":"`...)
	raw = append(raw, r.Hash...)
	r.Raw = append(raw, '"', '}')
	return nil
}

// Decode reads one stored record, keeping its bytes in Raw. Member names
// that repeat, or differ only in letter case, are refused, as is invalid
// UTF-8: such a record reads differently to different JSON readers.
func Decode(raw []byte) (Record, error) {
	var r Record
	if err := canonjson.CheckDocument(raw); err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, err
	}
	if r.Session == "" {
		return r, fmt.Errorf("a record without session")
	}
	r.Raw = bytes.Clone(raw)
	return r, nil
}

// hashOf returns the hash r's stored bytes should carry, by the rule of
// its format version.
func hashOf(r *Record) (string, error) {
	if r.Raw == nil {
		return "", fmt.Errorf("the record has no stored bytes to verify")
	}
	switch r.V {
	case 0:
		// Before versions, a record's hash was SHA-256 over Go's encoding
		// of the record with an empty hash, and the stored line was that
		// encoding with the hash filled in as its last member. Reversing
		// the fill on the stored bytes gives the hashed bytes back without
		// decoding anything.
		tail := `"hash":"` + r.Hash + `"}`
		if len(r.Hash) != 64 || !bytes.HasSuffix(r.Raw, []byte(tail)) {
			return "", fmt.Errorf("a record of the first format must end with its hash")
		}
		sum := sha256.Sum256(append(bytes.Clone(r.Raw[:len(r.Raw)-len(tail)]), `"hash":""}`...))
		return hex.EncodeToString(sum[:]), nil
	case Version:
		b, err := canonjson.Append(nil, r.Raw, &canonjson.Options{Omit: "hash"})
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	}
	return "", fmt.Errorf("record format %d is newer than this agentplane's %d: use a newer agentplane", r.V, Version)
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
// Hash equal to the hash of its stored bytes (Raw). It returns a
// *ChainError for the first bad record.
func Verify(recs []Record) error {
	var v Verifier
	for i := range recs {
		if err := v.Add(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Verifier checks a session's records as they come, a page at a time:
// Verify without holding the chain in memory. The zero value expects the
// chain's first record.
type Verifier struct {
	c       chain
	n       int
	session string
}

// Add checks that r continues the chain (see Verify) and moves on; it
// returns a *ChainError when it does not.
func (v *Verifier) Add(r *Record) error {
	if v.n > 0 && r.Session != v.session {
		return &ChainError{Session: r.Session, Index: v.n, Seq: r.Seq, Reason: "belongs to session " + r.Session + ", not " + v.session}
	}
	if reason := v.c.next(r); reason != "" {
		return &ChainError{Session: r.Session, Index: v.n, Seq: r.Seq, Reason: reason}
	}
	v.session = r.Session
	v.n++
	return nil
}

// End checks that the chain read so far ends where the session says it
// does (its head: the last record's seq and hash), so a chain cut at its
// tail, or one with records past its head, is a *ChainError naming the
// first record missing or extra.
func (v *Verifier) End(session string, headSeq int64, headHash string) error {
	switch {
	case v.c.seq < headSeq:
		return &ChainError{Session: session, Index: v.n, Seq: v.c.seq + 1,
			Reason: fmt.Sprintf("the chain ends at record %d, but the session's head is record %d: the records after %d were removed", v.c.seq, headSeq, v.c.seq)}
	case v.c.seq > headSeq:
		return &ChainError{Session: session, Index: int(headSeq), Seq: headSeq + 1,
			Reason: fmt.Sprintf("the chain goes on to record %d past the session's head, record %d: records were added after it", v.c.seq, headSeq)}
	case v.c.hash != headHash:
		return &ChainError{Session: session, Index: v.n - 1, Seq: v.c.seq,
			Reason: "the last record is not the session's head (another hash): the chain's end was replaced"}
	}
	return nil
}

// Records is how many records were added; Last is the last one's seq.
func (v *Verifier) Records() int { return v.n }

// Last is the sequence number of the last record added (0 before any).
func (v *Verifier) Last() int64 { return v.c.seq }

// chain is where a session's chain has got to while verifying.
type chain struct {
	seq  int64
	hash string
}

// next checks that r continues the chain and moves it on; it returns why
// not, or "".
func (c *chain) next(r *Record) string {
	if r.Seq != c.seq+1 {
		return fmt.Sprintf("sequence number %d where %d was expected: a record was dropped, added or reordered", r.Seq, c.seq+1)
	}
	if r.Prev != c.hash {
		return "does not follow the previous record's hash: a record was dropped, added or reordered"
	}
	h, err := hashOf(r)
	if err != nil {
		return err.Error()
	}
	if h != r.Hash {
		return "hash mismatch: the record was edited"
	}
	c.seq, c.hash = r.Seq, r.Hash
	return ""
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
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		r, err := Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("record %d is corrupt: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
