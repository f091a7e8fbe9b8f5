package httpapi_test

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/httpapi"
)

// historySeqs reads a history page's events' seqs.
func historySeqs(t *testing.T, h httpapi.History) []int64 {
	t.Helper()
	out := make([]int64, len(h.Events))
	for i, raw := range h.Events {
		var e struct {
			Seq  int64  `json:"seq"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.Kind == "" {
			t.Fatalf("event %s: %v", raw, err)
		}
		out[i] = e.Seq
	}
	return out
}

// consecutive reports whether seqs run from first to last without a gap.
func consecutive(seqs []int64, first, last int64) bool {
	if int64(len(seqs)) != last-first+1 {
		return false
	}
	for i, s := range seqs {
		if s != first+int64(i) {
			return false
		}
	}
	return true
}

// A long session is read a page at a time, from either end, and its
// audit pages are the same records as the whole chain.
func TestHistoryPages(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	for i := range 30 {
		e.turn("", s.SessionID, httpapi.TurnBody{Text: []string{"switch to ddr mode", "switch to sales mode"}[i%2]})
	}
	base := "/v1/sessions/" + s.SessionID
	recs, _ := e.core.Records(t.Context(), s.SessionID, 0)
	end := int64(len(recs))
	var h httpapi.History
	if st := e.call("GET", base+"/history?limit=10", "", nil, &h); st != 200 {
		t.Fatalf("history: %d", st)
	}
	if seqs := historySeqs(t, h); !consecutive(seqs, end-9, end) || !h.MoreBefore || h.MoreAfter {
		t.Fatalf("the last page: %v, more before %v, after %v (chain of %d)", seqs, h.MoreBefore, h.MoreAfter, end)
	}
	// scrolling up, page by page, reaches the start with nothing missed
	var all []int64
	for before := end + 1; ; {
		e.call("GET", fmt.Sprintf("%s/history?limit=7&before=%d", base, before), "", nil, &h)
		seqs := historySeqs(t, h)
		all = append(seqs, all...)
		if !h.MoreBefore {
			break
		}
		before = seqs[0]
	}
	if !consecutive(all, 1, end) {
		t.Fatalf("pages read back to the start: %v", all)
	}
	// and forward from a point
	e.call("GET", base+"/history?after=5&limit=4", "", nil, &h)
	if seqs := historySeqs(t, h); !consecutive(seqs, 6, 9) || !h.MoreAfter || !h.MoreBefore {
		t.Fatalf("after 5: %v, more after %v", seqs, h.MoreAfter)
	}
	e.call("GET", fmt.Sprintf("%s/history?after=%d", base, end), "", nil, &h)
	if len(h.Events) != 0 || h.MoreAfter || !h.MoreBefore {
		t.Fatalf("after the end: %+v", h)
	}
	// the events are the stream's: the same JSON for the same record
	resp, cancel := e.stream(t, s.SessionID, end-1)
	ev := readSSE(t, resp.Body, 1)
	cancel()
	e.call("GET", base+"/history?limit=1", "", nil, &h)
	if len(ev) != 1 || ev[0].data != string(h.Events[0]) {
		t.Fatalf("the stream sent %+v, the history %s", ev, h.Events[0])
	}
	// an audit page is the stored records, one per line
	resp2, err := e.srv.Client().Get(e.srv.URL + base + "/audit?before=11&limit=3") // JSON Lines, which the validating client cannot read
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	sc := bufio.NewScanner(resp2.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 || lines[0] != string(recs[7].Raw) || lines[2] != string(recs[9].Raw) {
		t.Fatalf("audit page before 11: %d lines", len(lines))
	}
}

// The server checks a session's chain and names the first record that
// breaks it; a broken chain is not replayed.
func TestVerificationAndReplay(t *testing.T) {
	db := filepath.Join(t.TempDir(), "audit.db")
	e := newEnv(t, &envOptions{db: db})
	s := e.create("", nil)
	for _, text := range []string{"switch to ddr mode", "change the mode to sales", "hello there"} {
		e.turn("", s.SessionID, httpapi.TurnBody{Text: text})
	}
	base := "/v1/sessions/" + s.SessionID
	var v httpapi.Verification
	if st := e.call("GET", base+"/audit/verification", "", nil, &v); st != 200 || !v.Verified || v.Records != 4 || v.LastSeq != 4 || v.FirstBad != nil {
		t.Fatalf("verification of an intact chain: %d %+v", st, v)
	}
	var r httpapi.Replayed
	if st := e.call("GET", base+"/audit/replay", "", nil, &r); st != 200 || r.Records != 4 || len(r.Divergences) != 0 {
		t.Fatalf("replay on the recording configuration: %d %+v", st, r)
	}
	// the same store under a configuration without the "change the mode
	// to" trigger: the second turn would have gone to the LLM
	changed := newEnv(t, &envOptions{db: db, edit: func(y string) string {
		const trig = "      - \"change [the] mode to {item}\"\n"
		if !strings.Contains(y, trig) {
			t.Fatal("the demo configuration changed: no trigger to remove")
		}
		return strings.Replace(y, trig, "", 1)
	}})
	// each record replays on the configuration it names, kept in the store:
	// no divergence; on the configuration in force, the second turn diverges
	if st := changed.call("GET", base+"/audit/replay", "", nil, &r); st != 200 || r.Records != 4 || len(r.Divergences) != 0 {
		t.Fatalf("replay on the configurations the records name: %d %+v", st, r)
	}
	if st := changed.call("GET", base+"/audit/replay?against=current", "", nil, &r); st != 200 || len(r.Divergences) == 0 || r.Total != len(r.Divergences) || r.Divergences[0].Seq != 3 || r.Divergences[0].Field != "decision" {
		t.Fatalf("replay on a changed configuration: %d %+v", st, r)
	}
	if !strings.Contains(string(r.Divergences[0].Recorded), "invoke_command") || !strings.Contains(string(r.Divergences[0].Replayed), "continue_with_llm") {
		t.Fatalf("the divergence: %+v", r.Divergences[0])
	}
	// a record altered in the database
	sqldb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	res, err := sqldb.Exec(`UPDATE audit SET record = replace(record, 'switch to ddr mode', 'switch to DDR mode') WHERE session = ? AND seq = 2`, s.SessionID)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("tamper: %v, %d rows", err, n)
	}
	if st := e.call("GET", base+"/audit/verification", "", nil, &v); st != 200 || v.Verified || v.FirstBad == nil || v.FirstBad.Seq != 2 || v.FirstBad.Reason == "" {
		t.Fatalf("verification of an altered chain: %d %+v", st, v)
	}
	var eb httpapi.ErrorBody
	st := e.call("GET", base+"/audit/replay", "", nil, &eb)
	errCode(t, st, eb, http.StatusConflict, agentplane.CodeInvalidState)
	if !strings.Contains(eb.Error.Message, "does not verify") {
		t.Fatalf("replay of an altered chain: %q", eb.Error.Message)
	}
	// another session's chain cut at its tail: its last two records deleted
	// (it verified whole: every record left followed the one before)
	cut := e.create("", nil)
	for _, text := range []string{"switch to ddr mode", "change the mode to sales", "hello there"} {
		e.turn("", cut.SessionID, httpapi.TurnBody{Text: text})
	}
	if res, err = sqldb.Exec(`DELETE FROM audit WHERE session = ? AND seq > 2`, cut.SessionID); err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Fatalf("cut: %d rows", n)
	}
	if st := e.call("GET", "/v1/sessions/"+cut.SessionID+"/audit/verification", "", nil, &v); st != 200 || v.Verified || v.FirstBad == nil || v.FirstBad.Seq != 3 ||
		!strings.Contains(v.FirstBad.Reason, "removed") || v.LastSeq != 2 {
		t.Fatalf("verification of a chain cut at its tail: %d %+v %+v", st, v, v.FirstBad)
	}
}
