package killtest

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
)

// TestNotificationsSurviveKills kills serve (SQLite) with SIGKILL 200
// times while clients emit notifications on all three channels and ack
// their inbox, and its watchdog escalates the agent's (no LLM: at once, or
// by TTL). Afterwards every accepted notification is in the ledger —
// DELIVERED, FAILED or still live — none was acknowledged twice, and none
// was shown on the floor twice.
func TestNotificationsSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it 200 times")
	}
	t.Parallel() // it waits on processes of its own most of the time
	bin := servetest.Binary(t)
	db := filepath.Join(t.TempDir(), "kill.db")
	// a session for the floor's notifications
	url, cmd, _ := servetest.Serve(t, bin, "--db", db)
	session := servetest.NewSession(t, url)
	cmd.Process.Kill()
	cmd.Wait()

	var mu sync.Mutex
	accepted := map[string]bool{}
	acks := map[string]int{}
	r := rand.New(rand.NewPCG(7, 11))
	const kills = 200
	for range kills {
		url, cmd, _ := servetest.Serve(t, bin, "--db", db)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // emitter
			bodies := []map[string]any{
				{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": "inbox"},
				{"address": "SESSION", "session_id": session, "target": "USER", "handler": "SYSTEM", "title": "floor"},
				{"address": "USER", "target": "AGENT", "handler": "AGENT", "title": "agent", "ttl_seconds": 1},
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, body, err := servetest.PostJSON(url+"/v1/notifications", bodies[i%3])
				if err != nil {
					return
				}
				if resp.StatusCode == 201 {
					var c struct{ ID string }
					json.Unmarshal(body, &c)
					mu.Lock()
					accepted[c.ID] = true
					mu.Unlock()
				}
			}
		})
		wg.Go(func() { // acker
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(url + "/v1/inbox?limit=20")
				if err != nil {
					return
				}
				var inbox struct{ Notifications []notify.Notification }
				json.NewDecoder(resp.Body).Decode(&inbox)
				resp.Body.Close()
				for _, n := range inbox.Notifications {
					if n.State == notify.StateDelivered {
						continue
					}
					resp, err := http.Post(url+"/v1/notifications/"+n.ID+"/ack", "application/json", nil)
					if err != nil {
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						mu.Lock()
						acks[n.ID]++
						mu.Unlock()
					}
				}
			}
		})
		time.Sleep(time.Duration(50+r.IntN(250)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
	// the ledger afterwards
	st, err := sqlite.Open(context.Background(), db, &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
	if err != nil {
		t.Fatalf("the database does not open cleanly after %d kills: %v", kills, err)
	}
	defer st.Close()
	l, _ := notify.NewLedger(st, nil)
	states := map[notify.State]int{}
	for id := range accepted {
		n, err := l.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("accepted notification %s is lost: %v", id, err)
		}
		states[n.State]++
	}
	for id, k := range acks {
		if k > 1 {
			t.Fatalf("notification %s acknowledged %d times", id, k)
		}
	}
	recs, err := st.Records(context.Background(), session, 0)
	if err != nil || audit.Verify(recs) != nil {
		t.Fatalf("the session's chain: %v", err)
	}
	shown := map[string]int{}
	for _, rec := range recs {
		if rec.Notice != nil {
			if shown[rec.Notice.ID]++; shown[rec.Notice.ID] > 1 {
				t.Fatalf("notification %s shown on the floor twice", rec.Notice.ID)
			}
		}
	}
	if len(accepted) == 0 || len(acks) == 0 {
		t.Fatalf("%d accepted, %d acked: the test did no work", len(accepted), len(acks))
	}
	t.Logf("%d kills: %d notifications accepted, all in the ledger %v; %d acked once each; %d shown on the floor once each",
		kills, len(accepted), states, len(acks), len(shown))
}
