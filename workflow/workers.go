package workflow

import (
	"sync"
	"time"
)

// workers runs tasks' attempts and workflows' runners on goroutines kept
// a while between jobs. Both go deep: through the gate into the store's
// group commit, which they lead as often as not, into SQLite. A new
// goroutine's stack grows to that depth by copying itself, every time; a
// kept one has grown already.
type workers struct {
	jobs chan func() // unbuffered: a job sent is taken by an idle worker
	wg   *sync.WaitGroup
	stop <-chan struct{}
	idle time.Duration // how long a worker waits for its next job
}

// run runs f on an idle worker, or on a new one. The workers are counted
// in wg (the engine's); they end once stop is closed (after the job they
// run), or when idle for long.
func (p *workers) run(f func()) {
	select {
	case p.jobs <- f:
		return
	default:
	}
	p.wg.Add(1)
	go p.work(f)
}

func (p *workers) work(f func()) {
	defer p.wg.Done()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		t.Reset(p.idle)
		select {
		case f = <-p.jobs:
		case <-t.C:
			return
		case <-p.stop:
			return
		}
	}
}
