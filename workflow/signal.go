package workflow

import "time"

// A workflow's change signal: a channel closed when the workflow writes
// something here (or, while Watch runs, in another instance), made when
// someone first waits on it and dropped once closed. It is kept only
// while someone waits: the engine's waiters (Wait, a command settling,
// Follow) count themselves in and out; a channel Changes hands out is
// closed and forgotten about a Poll after it was last asked for, when
// nothing wrote before (its holder looks again then, as it does on its
// own poll). So the map stays as large as what is waited on now, on
// every store.

// signal is one workflow's change signal.
type signal struct {
	ch      chan struct{}
	w       *Workflow // the workflow as the write that closed ch left it (this engine's runner's); nil: not known
	waiters int       // the engine's waiters on it now
	loose   time.Time // when Changes last handed it out; zero: never
}

// signalOf returns the workflow's signal, made when there is none; e.mu
// is held.
func (e *Engine) signalOf(id string) *signal {
	s, ok := e.changed[id]
	if !ok {
		s = &signal{ch: make(chan struct{})}
		e.changed[id] = s
	}
	return s
}

// sweep closes and forgets the signals only Changes handed out, a Poll
// after they were last asked for, at most once a Poll; e.mu is held.
func (e *Engine) sweep(now time.Time) {
	if now.Sub(e.swept) < e.poll {
		return
	}
	e.swept = now
	for id, s := range e.changed {
		if s.waiters == 0 && now.Sub(s.loose) >= e.poll {
			close(s.ch)
			delete(e.changed, id)
		}
	}
}

// Changes returns a channel closed when the workflow next writes
// something in this process, or — while Watch runs — in another one. It
// may also be closed when nothing was written, about a Poll after it was
// asked for (the engine forgets what nobody waits on): a caller looks at
// the workflow again when it is closed, and asks for the next one.
func (e *Engine) Changes(id string) <-chan struct{} {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep(now)
	s := e.signalOf(id)
	s.loose = now
	return s.ch
}

// fire closes the workflow's signal: whoever waits on it looks again.
func (e *Engine) fire(id string) { e.fireWith(id, nil) }

// fireWith closes the workflow's signal after a write of this engine's
// runner that left the workflow as w (a copy nobody changes).
func (e *Engine) fireWith(id string, w *Workflow) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.changed[id]; ok {
		s.w = w
		close(s.ch)
		delete(e.changed, id)
	}
}

// waiter is one of the engine's own waits on a workflow: counted in its
// signal from waitOn until stop.
type waiter struct {
	e    *Engine
	id   string
	s    *signal   // the signal counted in; nil before the first changed
	done *Workflow // the workflow finished, as a closed signal said; nil: not known
}

// waitOn begins a wait on a workflow; stop ends it.
func (e *Engine) waitOn(id string) *waiter { return &waiter{e: e, id: id} }

// changed returns the workflow's signal now, counting the waiter in a
// new one when the last was closed.
func (w *waiter) changed() <-chan struct{} {
	e := w.e
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep(now)
	if w.s == nil || e.changed[w.id] != w.s { // the first, or the last was closed
		if w.s != nil && w.s.w != nil && Terminal(w.s.w.Status) {
			w.done = w.s.w // it changes no more
		}
		w.s = e.signalOf(w.id)
		w.s.waiters++
	}
	return w.s.ch
}

// stop ends the wait: a signal nobody waits on any longer is forgotten.
func (w *waiter) stop() {
	e := w.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if w.s == nil || e.changed[w.id] != w.s {
		return // closed already
	}
	w.s.waiters--
	if w.s.waiters == 0 && w.s.loose.IsZero() {
		delete(e.changed, w.id)
	}
	w.s = nil
}

// committed returns the workflow as this engine's runner committed it
// last, when that is the workflow as stored: the runner holds it (its
// writes fire the signal after they change what it returns), or a closed
// signal said it finished. nil: not known here (read the database).
// Call it after changed, so that no write goes unseen between the two.
func (w *waiter) committed() *Workflow {
	e := w.e
	e.mu.Lock()
	r := e.runners[w.id]
	e.mu.Unlock()
	if r != nil {
		if last := r.last.Load(); last != nil {
			return last
		}
	}
	return w.done
}
