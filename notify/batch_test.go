package notify

import (
	"fmt"
	"sync"
	"testing"
)

type testReq struct {
	key  string
	line turn
	in   int // the batch that holds it; 0: none
}

func (r *testReq) batchKey() string { return r.key }
func (r *testReq) turn() *turn      { return &r.line }
func (r *testReq) reset()           {}

// TestBatcherTakesOnce: requests from many goroutines, some with the same
// key, each in exactly one batch — whether a commit calls take once or
// twice (a transaction tried again: the same batch both times) — no batch
// holding a key twice or more than max, and each request returning only
// once its batch committed.
func TestBatcherTakesOnce(t *testing.T) {
	var b batcher[*testReq]
	const max, goroutines, each = 5, 12, 40
	var mu sync.Mutex
	batches := 0
	commit := func(take func() []*testReq) {
		mu.Lock()
		twice := batches%2 == 0
		mu.Unlock()
		batch := take()
		if twice {
			if again := take(); fmt.Sprint(again) != fmt.Sprint(batch) {
				t.Errorf("take returned %v, then %v", batch, again)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		batches++
		seen := map[string]bool{}
		if len(batch) == 0 || len(batch) > max {
			t.Errorf("a batch of %d", len(batch))
		}
		for _, r := range batch {
			if seen[r.key] {
				t.Errorf("key %s twice in one batch", r.key)
			}
			seen[r.key] = true
			if r.in != 0 {
				t.Errorf("%s in batches %d and %d", r.key, r.in, batches)
			}
			r.in = batches
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r := &testReq{key: fmt.Sprintf("k%d", (g+i)%7), line: newTurn()}
				b.run(r, max, commit)
				mu.Lock()
				in := r.in
				mu.Unlock()
				if in == 0 {
					t.Errorf("%s returned before a batch held it", r.key)
				}
			}
		})
	}
	wg.Wait()
	if len(b.waiting) != 0 || b.queued {
		t.Fatalf("after the last batch: %d waiting, queued %v", len(b.waiting), b.queued)
	}
}
