package notify_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentplane/agentplane/notify"
)

// ref is the reference model of a notification (§5).
type ref struct {
	id       string
	user     string
	addrKey  string
	address  notify.Address
	dedup    string
	title    string
	state    notify.State
	lease    int64
	until    int64 // Unix nanoseconds; 0 when not locked
	channel  notify.Channel
	attempts int
}

// outcome is what an operation should do: succeed, or fail with one of
// the ledger's errors.
type outcome int

const (
	ok outcome = iota
	notFound
	illegal
	stale
)

func classify(err error) outcome {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, notify.ErrNotFound):
		return notFound
	case errors.Is(err, notify.ErrIllegal):
		return illegal
	case errors.Is(err, notify.ErrStale):
		return stale
	}
	return -1
}

// moveOutcome is the ledger's rule for a CAS from states (from) with a
// lease: illegal when §5.1 forbids the target state, stale when the lease
// or the state does not match (or a lock has not expired).
func moveOutcome(r *ref, from []notify.State, to notify.State, lease int64, expired bool, now int64) outcome {
	if !notify.Allowed(r.state, to) {
		return illegal
	}
	if r.lease != lease {
		return stale
	}
	if expired && r.state == notify.StateLocked && r.until > now {
		return stale
	}
	for _, s := range from {
		if s == r.state {
			return ok
		}
	}
	return stale
}

var checks atomic.Int64

// TestLedgerModel drives the ledger with random emits (with and without
// dedup keys and leases), dispatches, claims with current and stale
// leases, lease expiries, deliveries, escalations, failures and acks, and
// checks every outcome and every notification's state, lease and channel
// against the reference model of §5 after every step. Steps per run:
// -rapid.checks × -rapid.steps (100 × 30 by default; the note's 100,000
// are -rapid.checks=1000 -rapid.steps=100).
func TestLedgerModel(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			clk := newClock()
			l, err := notify.NewLedger(st, &notify.Options{Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			var steps atomic.Int64
			rapid.Check(t, func(rt *rapid.T) {
				run := checks.Add(1) // this run's users and sessions are its own
				ctx := context.Background()
				var notes []*ref
				users := []string{fmt.Sprintf("u%d-a", run), fmt.Sprintf("u%d-b", run)}
				pick := func(rt *rapid.T) *ref {
					if len(notes) == 0 {
						rt.Skip("nothing emitted yet")
					}
					return notes[rapid.IntRange(0, len(notes)-1).Draw(rt, "note")]
				}
				lease := func(rt *rapid.T, r *ref) int64 {
					return r.lease + int64(rapid.IntRange(-1, 1).Draw(rt, "lease-offset"))
				}
				expect := func(rt *rapid.T, what string, got error, want outcome) {
					steps.Add(1)
					if c := classify(got); c != want {
						rt.Fatalf("%s: got %v (class %d), want class %d", what, got, c, want)
					}
				}
				rt.Repeat(map[string]func(*rapid.T){
					"emit": func(rt *rapid.T) {
						n := notify.Notification{
							Address:  rapid.SampledFrom([]notify.Address{notify.AddressUser, notify.AddressSession}).Draw(rt, "address"),
							UserID:   rapid.SampledFrom(users).Draw(rt, "user"),
							Target:   rapid.SampledFrom([]notify.Target{notify.TargetUser, notify.TargetAgent}).Draw(rt, "target"),
							Handler:  rapid.SampledFrom([]notify.Handler{notify.HandlerSystem, notify.HandlerAgent}).Draw(rt, "handler"),
							Title:    rapid.StringMatching(`[a-z]{1,6}`).Draw(rt, "title"),
							DedupKey: rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(rt, "dedup"),
						}
						key := "USER:" + n.UserID
						if n.Address == notify.AddressSession {
							n.SessionID = n.UserID + "-s"
							key = "SESSION:" + n.SessionID
						}
						var live *ref
						for _, r := range notes {
							if n.DedupKey != "" && r.addrKey == key && r.dedup == n.DedupKey && !r.state.Terminal() {
								live = r
							}
						}
						var with int64
						if live != nil {
							with = lease(rt, live)
						}
						got, err := l.Emit(ctx, n, with)
						switch {
						case live == nil:
							expect(rt, "emit", err, ok)
							ch, _ := notify.Route(n.Address, n.Target, n.Handler)
							if got.Deduplicated || got.State != notify.StatePending || got.Channel != ch {
								rt.Fatalf("emit: %+v", got)
							}
							notes = append(notes, &ref{id: got.ID, user: n.UserID, addrKey: key, address: n.Address, dedup: n.DedupKey, title: n.Title,
								state: notify.StatePending, channel: ch})
						case (live.state == notify.StateLocked || live.state == notify.StateEscalated) && with != live.lease:
							expect(rt, "dedup emit without the lease", err, stale)
						default:
							expect(rt, "dedup emit", err, ok)
							if !got.Deduplicated || got.ID != live.id {
								rt.Fatalf("dedup emit made %+v, want an update of %s", got, live.id)
							}
							live.title = n.Title
						}
					},
					"dispatch": func(rt *rapid.T) {
						r := pick(rt)
						_, err := l.Dispatch(ctx, r.id)
						want := moveOutcome(r, []notify.State{notify.StatePending}, notify.StateDispatched, r.lease, false, 0)
						expect(rt, "dispatch", err, want)
						if want == ok {
							r.state = notify.StateDispatched
						}
					},
					"claim": func(rt *rapid.T) {
						r := pick(rt)
						with := lease(rt, r)
						hold := time.Duration(rapid.SampledFrom([]int{1, 60}).Draw(rt, "hold")) * time.Second
						now := clk.now().UnixNano()
						_, err := l.Claim(ctx, r.id, with, hold)
						want := moveOutcome(r, []notify.State{notify.StateDispatched, notify.StateLocked}, notify.StateLocked, with, true, now)
						expect(rt, "claim", err, want)
						if want == ok {
							r.state, r.lease, r.until = notify.StateLocked, r.lease+1, now+int64(hold)
							r.attempts++
						}
					},
					"deliver": func(rt *rapid.T) {
						r := pick(rt)
						with := lease(rt, r)
						_, err := l.Deliver(ctx, r.id, with)
						want := moveOutcome(r, []notify.State{notify.StateLocked, notify.StateEscalated}, notify.StateDelivered, with, false, 0)
						expect(rt, "deliver", err, want)
						if want == ok {
							r.state, r.until = notify.StateDelivered, 0
						}
					},
					"escalate": func(rt *rapid.T) {
						r := pick(rt)
						with := lease(rt, r)
						_, err := l.Escalate(ctx, r.id, with)
						want := moveOutcome(r, []notify.State{notify.StateLocked}, notify.StateEscalated, with, false, 0)
						expect(rt, "escalate", err, want)
						if want == ok {
							r.state, r.until, r.channel = notify.StateEscalated, 0, notify.Fallback(r.address)
						}
					},
					"fail": func(rt *rapid.T) {
						r := pick(rt)
						with := lease(rt, r)
						_, err := l.Fail(ctx, r.id, with)
						want := moveOutcome(r, []notify.State{notify.StateLocked, notify.StateEscalated}, notify.StateFailed, with, false, 0)
						expect(rt, "fail", err, want)
						if want == ok {
							r.state, r.until = notify.StateFailed, 0
						}
					},
					"ack": func(rt *rapid.T) {
						r := pick(rt)
						user := rapid.SampledFrom(users).Draw(rt, "acker")
						_, err := l.Ack(ctx, r.id, user)
						var want outcome
						switch {
						case user != r.user:
							want = notFound
						case r.channel == notify.ChannelAgent && r.state != notify.StateEscalated:
							want = illegal
						case r.state == notify.StateEscalated:
							want = ok
						case r.state == notify.StateDispatched, r.state == notify.StatePending:
							want = ok // a PENDING one its owner saw elsewhere: dispatched, then acknowledged
						case !notify.Allowed(r.state, notify.StateLocked):
							want = illegal
						default:
							want = stale // LOCKED: someone owns it
						}
						expect(rt, "ack", err, want)
						if want == ok {
							if r.state == notify.StateDispatched || r.state == notify.StatePending {
								r.lease++
								r.attempts++
							}
							r.state, r.until = notify.StateDelivered, 0
						}
					},
					"time passes": func(rt *rapid.T) {
						clk.add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "seconds")) * time.Second)
					},
					"": func(rt *rapid.T) { // the invariant, after every step
						live := map[string]string{}
						for _, r := range notes {
							got, err := l.Get(ctx, r.id)
							if err != nil || got.State != r.state || got.OwnerLease != r.lease || got.Channel != r.channel || got.Title != r.title ||
								got.Attempts != r.attempts || (r.until != 0) != !got.LeaseUntil.IsZero() {
								rt.Fatalf("%s: ledger %+v %v, model %+v", r.id, got, err, *r)
							}
							if r.dedup != "" && !r.state.Terminal() {
								k := r.addrKey + "/" + r.dedup
								if other, dup := live[k]; dup {
									rt.Fatalf("two live notifications with one dedup key: %s and %s", other, r.id)
								}
								live[k] = r.id
							}
						}
					},
				})
			})
			t.Logf("%d operations checked against the model", steps.Load())
		})
	}
}
