package workflow

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// TestCopiesShareTheTaskIndex: a copy shares its original's index of
// task places; the original and copies looking tasks up (and building
// their index again as their tasks move) on separate goroutines do not
// race (go test -race), and each finds its own tasks.
func TestCopiesShareTheTaskIndex(t *testing.T) {
	w := &Workflow{}
	for i := range 50 {
		w.Tasks = append(w.Tasks, TaskRun{Task: Task{ID: string(rune('a'+i%26)) + string(rune('A'+i/26))}})
	}
	if w.task("aA") == nil {
		t.Fatal("no aA")
	}
	var ids []string
	for _, tr := range w.Tasks[:10] {
		ids = append(ids, tr.ID)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		c := w.copy()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 2000 {
				if g%2 == 0 && n%7 == 0 { // move the copy's tasks: its index goes stale
					c.Tasks = append(c.Tasks[1:], c.Tasks[0])
				}
				for _, id := range ids {
					if p := c.task(id); p == nil || p.ID != id {
						t.Errorf("copy %d: task(%s) = %v", g, id, p)
						return
					}
				}
				_ = c.copy()
			}
		}()
	}
	for n := range 2000 {
		if n%5 == 0 {
			w.Tasks = append(w.Tasks[1:len(w.Tasks):len(w.Tasks)], w.Tasks[0])
		}
		if w.task("bA") == nil {
			t.Fatal("no bA")
		}
	}
	wg.Wait()
}

// TestRowsRefuseAPartialRow: values that are not whole rows are an error
// naming the count, before anything runs (the transaction is not used).
func TestRowsRefuseAPartialRow(t *testing.T) {
	j := newSQLJournal(nil, nil)
	err := j.insertStates.insert(context.Background(), nil, make([]any, 7))
	if err == nil || !strings.Contains(err.Error(), "7 values are not rows of 6") {
		t.Fatalf("insert of 7 values in rows of 6: %v", err)
	}
}
