package notify

import (
	"context"
	"sync"

	"github.com/agentplane/agentplane/store"
)

// batcher commits requests that arrive together in one commit. A request
// that finds no commit queued queues one (it leads it); the others wait in
// line. A commit takes its batch from the line only when it starts to
// write — on SQLite when the store's group commit applies it, inside the
// group's transaction, so what arrived while it waited behind the groups
// before it rides in it, and in that group's one fsync — and the first
// request to arrive after the take queues the next commit at once, while
// this one is still committing. Each batch holds each key once, at most
// max requests; the rest are left in line, and the first of them leads
// the next commit. Each request returns once the batch holding it was
// committed.
type batcher[R batched] struct {
	mu      sync.Mutex
	waiting []R
	queued  bool // a commit is queued that has not taken its batch yet
}

// batched is a request a batcher carries.
type batched interface {
	// batchKey is what a batch holds once at most.
	batchKey() string
	// turn is the request's place in line.
	turn() *turn
	// reset forgets what an earlier try of its batch's statement set
	// (a group commit tried again applies it again).
	reset()
}

// turn is a request's place in a batcher's line.
type turn struct {
	done chan struct{} // closed when its batch was committed
	lead chan struct{} // closed when it must lead the next commit
}

func newTurn() turn { return turn{done: make(chan struct{}), lead: make(chan struct{})} }

// run queues r and returns once a batch holding r was committed: by
// another request's commit, or by the one r leads. commit commits the
// batch take returns and sets each request's result; take may be called
// more than once (a transaction tried again) and returns the same batch
// each time; what commit never took is taken after it returns (a commit
// that failed before it started), for commit's errors to reach it —
// commit must set them on take's batch after it calls the store.
func (b *batcher[R]) run(r R, max int, commit func(take func() []R)) {
	b.mu.Lock()
	b.waiting = append(b.waiting, r)
	lead := !b.queued
	b.queued = true
	b.mu.Unlock()
	t := r.turn()
	if !lead {
		select {
		case <-t.done:
			return
		case <-t.lead:
		}
	}
	b.lead(max, commit)
	<-t.done // in the batch just committed, or in one taken since by a commit another request leads
}

// lead queues one commit.
func (b *batcher[R]) lead(max int, commit func(take func() []R)) {
	var batch []R
	taken := false
	take := func() []R {
		if taken {
			return batch
		}
		taken = true
		b.mu.Lock()
		defer b.mu.Unlock()
		var later []R
		seen := make(map[string]bool, len(b.waiting))
		for _, r := range b.waiting {
			if k := r.batchKey(); seen[k] || len(batch) == max {
				later = append(later, r) // the same key twice: the second after the first
			} else {
				seen[k] = true
				batch = append(batch, r)
			}
		}
		b.waiting = later
		if len(later) > 0 {
			close(later[0].turn().lead) // it queues the next commit; queued stays true
		} else {
			b.queued = false
		}
		return batch
	}
	commit(take)
	for _, r := range take() {
		close(r.turn().done)
	}
}

// commitBatch commits the batch take returns as one statement, built by
// statement, whose returned rows row reads: on PostgreSQL as that
// statement alone (atomic by itself), the batch taken once one of its
// kind's slots is free (a batch in flight finished); on SQLite inside the
// store's group commit, the batch taken when the group applies it — what
// arrived while it waited behind the groups before it rides in it — and
// each request reset first.
func commitBatch[R batched](ctx context.Context, l *Ledger, slots chan struct{}, take func() []R,
	statement func([]R) (string, []any), row func([]R) func(scan func(...any) error) error) error {
	var op store.Op
	if l.q.Dialect() == store.Postgres {
		slots <- struct{}{}
		defer func() { <-slots }()
		batch := take()
		query, args := statement(batch)
		op = store.Statement{Query: query, Args: args, Row: row(batch)}
	} else {
		op = store.OpFunc(func(ctx context.Context, tx store.Tx) error {
			batch := take()
			for _, r := range batch {
				r.reset()
			}
			query, args := statement(batch)
			return tx.Query(ctx, query, args, row(batch))
		})
	}
	return l.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}})
}
