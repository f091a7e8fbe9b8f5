package notify

import "sync"

// batcher commits requests that arrive together in one commit: the first
// to arrive leads — it commits every request waiting (each key once, at
// most max; the rest wait for the next batch), then hands the lead to the
// first that arrived meanwhile. Each request returns once the batch
// holding it was committed.
type batcher[R batched] struct {
	mu      sync.Mutex
	waiting []R
	leading bool
}

// batched is a request a batcher carries.
type batched interface {
	// batchKey is what a batch holds once at most.
	batchKey() string
	// turn is the request's place in line.
	turn() *turn
}

// turn is a request's place in a batcher's line.
type turn struct {
	done chan struct{} // closed when its batch was committed
	lead chan struct{} // closed when it must lead the next batch
}

func newTurn() turn { return turn{done: make(chan struct{}), lead: make(chan struct{})} }

// run queues r and returns once a batch holding r was committed: by
// another request's commit, or, when r leads, by commit, which sets each
// request's result.
func (b *batcher[R]) run(r R, max int, commit func(batch []R)) {
	b.mu.Lock()
	b.waiting = append(b.waiting, r)
	lead := !b.leading
	b.leading = true
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
	<-t.done // in the batch just committed
}

// lead commits the requests waiting now, then passes the lead on.
func (b *batcher[R]) lead(max int, commit func(batch []R)) {
	b.mu.Lock()
	var batch, later []R
	seen := map[string]bool{}
	for _, r := range b.waiting {
		if k := r.batchKey(); seen[k] || len(batch) == max {
			later = append(later, r) // the same key twice: the second after the first
		} else {
			seen[k] = true
			batch = append(batch, r)
		}
	}
	b.waiting = later
	b.mu.Unlock()

	commit(batch)
	for _, r := range batch {
		close(r.turn().done)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		b.leading = false
		return
	}
	close(b.waiting[0].turn().lead)
}
