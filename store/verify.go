package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
)

// Verification is what verifying a session's audit chain found.
type Verification struct {
	Session string
	Records int   // records read and checked
	LastSeq int64 // the last one's sequence number; 0 for none
	// Head is where the session says its chain ends; NoHead says there is
	// no session row to say it (its chain is checked without its end).
	Head   Head
	NoHead bool
	// FirstBad is the first record that breaks the chain — edited,
	// dropped, reordered, or missing from its end — or nil when the chain
	// is whole.
	FirstBad *audit.ChainError
}

// VerifyPage is how many records Verify reads at a time.
const VerifyPage = 1000

// Verify reads a session's audit chain a page at a time and checks it:
// every record continues the one before it (audit.Verifier), and the
// chain ends at the session's head (Store.Head), so a chain cut at its
// tail is found too. Its memory does not grow with the chain. It is the
// one verification of a stored chain: the server's GET
// …/audit/verification and `agentplane audit verify --db` both call it.
// An error means the chain could not be read (a record that does not
// decode, a store that does not answer); a chain that does not verify is a
// Verification with FirstBad.
func Verify(ctx context.Context, s Store, session string) (Verification, error) {
	out := Verification{Session: session}
	head, err := s.Head(ctx, session) // before the records: a record appended meanwhile is past it, not missing
	switch {
	case agentplane.ErrorCode(err) == agentplane.CodeNotFound:
		out.NoHead = true // a chain whose session row is gone is still a chain to check
	case err != nil:
		return out, err
	}
	out.Head = head
	var v audit.Verifier
	var after int64
	for done := false; !done; {
		page, err := s.RecordsAfter(ctx, session, after, VerifyPage)
		if err != nil {
			return out, err
		}
		done = len(page) < VerifyPage
		for i := range page {
			if !out.NoHead && page[i].Seq > head.Seq {
				done = true // appended after the head was read
				break
			}
			if err := v.Add(&page[i]); err != nil {
				out.FirstBad, _ = errors.AsType[*audit.ChainError](err)
				out.Records, out.LastSeq = v.Records(), v.Last()
				return out, nil
			}
			after = page[i].Seq
		}
	}
	out.Records, out.LastSeq = v.Records(), v.Last()
	if out.NoHead {
		return out, nil
	}
	if err := v.End(session, head.Seq, head.Hash); err != nil {
		out.FirstBad, _ = errors.AsType[*audit.ChainError](err)
	}
	return out, nil
}

// SessionIDs returns the id of every session a SQL store holds — in its
// sessions table, or with records in its audit table (a chain whose
// session row is gone is still a chain to check) — in order. A store that
// is not a Querier (the in-memory one) cannot list them.
func SessionIDs(ctx context.Context, st Store) ([]string, error) {
	q, ok := st.(Querier)
	if !ok {
		return nil, errors.New("store: listing every session needs a SQLite or PostgreSQL store")
	}
	var ids []string
	err := q.Query(ctx, `SELECT id FROM sessions UNION SELECT session FROM audit ORDER BY 1`, nil, func(scan func(dest ...any) error) error {
		var id string
		if err := scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list the sessions: %w", err)
	}
	return ids, nil
}
