package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/audit"
)

// Verification is what checking a stored session's audit chain found.
type Verification struct {
	Session string
	Records int   // how many records the chain holds
	LastSeq int64 // the last record's sequence number; 0 for none
	// FirstBad is the first record that breaks the chain; nil when the
	// chain verifies.
	FirstBad *audit.ChainError
}

// Verify reads a session's whole audit chain and checks it (see
// audit.Verify): the one verification of a stored chain, which the
// server's GET …/audit/verification and `agentplane audit verify --db`
// both call. An error means the chain could not be read (a record that
// does not decode, a store that does not answer); a chain that does not
// verify is a Verification with FirstBad.
func Verify(ctx context.Context, st Store, session string) (Verification, error) {
	recs, err := st.Records(ctx, session, 0)
	if err != nil {
		return Verification{Session: session}, err
	}
	v := Verification{Session: session, Records: len(recs)}
	if len(recs) > 0 {
		v.LastSeq = recs[len(recs)-1].Seq
	}
	var ce *audit.ChainError
	if err := audit.Verify(recs); errors.As(err, &ce) {
		v.FirstBad = ce
	} else if err != nil {
		return v, err
	}
	return v, nil
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
