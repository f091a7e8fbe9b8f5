package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
)

// TestTwoInstancesOnePostgres runs two agentplane processes against one
// PostgreSQL, taking turns on the same session at the same time. Afterwards
// the audit chain verifies and every state the chain records follows the one
// before it by exactly one version: no update was lost or applied twice.
func TestTwoInstancesOnePostgres(t *testing.T) {
	db := pgtest.Schema(t)
	bin := servetest.Binary(t)
	out, err := exec.Command(bin, "chat", "--db", db, "--mode", "sales").Output()
	m := regexp.MustCompile(`session ([0-9a-f]+),`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("create session: %v\n%s", err, out)
	}
	id := string(m[1])

	var script bytes.Buffer
	for i := 0; i < 40; i++ {
		fmt.Fprintln(&script, []string{"open the q1 cfo outreach template", "open the q1 cto outreach template", "hello", "open the outreach template", "1"}[i%5])
	}
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "chat", "--db", db, "--session", id)
			cmd.Stdin = bytes.NewReader(script.Bytes())
			outs[i], _ = cmd.CombinedOutput()
		}()
	}
	wg.Wait()

	recs := servetest.StoredChain(t, db, id)
	last := int64(0)
	changes := 0
	for _, r := range recs {
		if r.State == nil {
			continue
		}
		switch v := r.State.Version; {
		case v == last:
		case v == last+1:
			changes++
		default:
			t.Fatalf("record %d: state version %d after %d: an update was lost or applied twice", r.Seq, v, last)
		}
		last = r.State.Version
	}
	s, err := postgres.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess, _ := s.Session(context.Background(), id)
	if sess.Version != last || changes < 10 {
		t.Fatalf("session at version %d, chain ends at %d, %d changes", sess.Version, last, changes)
	}
	conflicts := strings.Count(string(outs[0])+string(outs[1]), "version_conflict") + strings.Count(string(outs[0])+string(outs[1]), "changed while")
	t.Logf("%d records, %d state changes, %d turns lost a race and changed nothing", len(recs), changes, conflicts)
}

// TestStreamsAcrossInstances runs two serve processes on one PostgreSQL:
// a turn taken through A appears on a stream opened on B, with each way
// B can learn of it (polling the chain heads, LISTEN/NOTIFY).
func TestStreamsAcrossInstances(t *testing.T) {
	for _, mode := range []string{"poll", "notify"} {
		t.Run(mode, func(t *testing.T) {
			db := pgtest.Schema(t)
			bin := servetest.Binary(t)
			a, _, _ := servetest.Serve(t, bin, "--db", db, "--pg-events", mode)
			b, _, _ := servetest.Serve(t, bin, "--db", db, "--pg-events", mode)
			session := servetest.NewSession(t, a)
			stream, err := http.Get(b + "/v1/sessions/" + session + "/events")
			if err != nil || stream.StatusCode != 200 {
				t.Fatalf("%v %v", stream, err)
			}
			defer stream.Body.Close()
			ids := make(chan string, 16)
			go func() {
				sc := bufio.NewScanner(stream.Body)
				for sc.Scan() {
					if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
						ids <- id
					}
				}
				close(ids)
			}()
			if id := <-ids; id != "1" {
				t.Fatalf("first event %s", id)
			}
			time.Sleep(200 * time.Millisecond) // B is following the session
			start := time.Now()
			if resp, body, err := servetest.PostJSON(a+"/v1/sessions/"+session+"/turns", map[string]string{"text": "switch to ddr mode"}); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %s", err, body)
			}
			select {
			case id := <-ids:
				if id != "2" {
					t.Fatalf("event %s", id)
				}
				t.Logf("%s: the turn through A reached B's stream %v after it was sent", mode, time.Since(start).Round(time.Millisecond))
			case <-time.After(5 * time.Second):
				t.Fatal("the turn taken through A never reached B's stream")
			}
		})
	}
}

// TestWatchdogsOfThreeInstances emits agent-channel notifications that
// nobody handles, then runs three serve processes on one PostgreSQL: their
// watchdogs race for every one, and each is escalated exactly once (one
// claim: owner_lease 1, one attempt) — fencing across processes.
func TestWatchdogsOfThreeInstances(t *testing.T) {
	db := pgtest.Schema(t)
	bin := servetest.Binary(t)
	const n = 40
	for i := range n {
		out, err := exec.Command(bin, "notify", "send", "--db", db, "--user", fmt.Sprintf("user-%d", i%4), "--title", "alert",
			"--target", "AGENT", "--handler", "AGENT", "--ttl", "1").CombinedOutput()
		if err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	time.Sleep(1100 * time.Millisecond) // every TTL runs out
	for range 3 {
		servetest.Serve(t, bin, "--db", db)
	}
	s, err := postgres.Open(context.Background(), db, &postgres.Options{Extensions: []store.Extension{notify.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, _ := notify.NewLedger(s, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		escalated := 0
		var all []notify.Notification
		for u := range 4 {
			list, err := l.List(context.Background(), notify.Query{UserID: fmt.Sprintf("user-%d", u), Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, list...)
		}
		for _, m := range all {
			if m.State == notify.StateEscalated {
				escalated++
				if m.OwnerLease != 1 || m.Attempts != 1 || m.Channel != notify.ChannelInbox {
					t.Fatalf("escalated by more than one watchdog: %+v", m)
				}
			}
		}
		if escalated == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d escalated", escalated, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
