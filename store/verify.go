package store

import (
	"context"
	"errors"

	"github.com/agentplane/agentplane/audit"
)

// Verification is what verifying a session's audit chain found.
type Verification struct {
	Records int   // records read and checked
	LastSeq int64 // the last one's sequence number
	Head    Head  // where the session says its chain ends
	// Bad is the first record that breaks the chain — edited, dropped,
	// reordered, or missing from its end — or nil when the chain is whole.
	Bad *audit.ChainError
}

// VerifyPage is how many records Verify reads at a time.
const VerifyPage = 1000

// Verify reads a session's audit chain a page at a time and checks it:
// every record continues the one before it (audit.Verifier), and the
// chain ends at the session's head (Store.Head), so a chain cut at its
// tail is found too. Its memory does not grow with the chain. The error is
// for a store that failed, or not_found.
func Verify(ctx context.Context, s Store, session string) (Verification, error) {
	head, err := s.Head(ctx, session) // before the records: a record appended meanwhile is past it, not missing
	if err != nil {
		return Verification{}, err
	}
	out := Verification{Head: head}
	var v audit.Verifier
	var after int64
	for done := false; !done; {
		page, err := s.RecordsAfter(ctx, session, after, VerifyPage)
		if err != nil {
			return out, err
		}
		done = len(page) < VerifyPage
		for i := range page {
			if page[i].Seq > head.Seq {
				done = true // appended after the head was read
				break
			}
			if err := v.Add(&page[i]); err != nil {
				out.Bad, _ = errors.AsType[*audit.ChainError](err)
				out.Records, out.LastSeq = v.Records(), v.Last()
				return out, nil
			}
			after = page[i].Seq
		}
	}
	out.Records, out.LastSeq = v.Records(), v.Last()
	if err := v.End(session, head.Seq, head.Hash); err != nil {
		out.Bad, _ = errors.AsType[*audit.ChainError](err)
	}
	return out, nil
}
