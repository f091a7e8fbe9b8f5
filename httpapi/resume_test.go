package httpapi_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/httpapi"
)

// smallConfig has one mode, general: the demo's ddr and sales are gone.
const smallConfig = `version: 1
modes:
  - {key: general, display_name: General, default: true, toolboxes: [core]}
toolboxes: [{id: core, catalogs: [modes], commands: [set_mode]}]
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true, triggers: ["switch to {item} mode"]}
`

// A stored session whose mode the configuration no longer has is fitted
// to it when a client opens it (POST …/resume, as the page does and as
// chat --session does): the default mode, recorded, and the person told —
// in the answer's notes and in the resume event; a session that fits is
// left alone, and nothing is recorded.
func TestResumeTellsWhatChanged(t *testing.T) {
	db := filepath.Join(t.TempDir(), "resume.db")
	before := newEnv(t, &envOptions{db: db})
	sid := before.create("", map[string]any{}).SessionID
	if a := before.turn("", sid, httpapi.TurnBody{Text: "switch to ddr mode"}); a.Snapshot.Mode != "ddr" {
		t.Fatalf("mode %s", a.Snapshot.Mode)
	}
	fits := before.create("", map[string]any{}).SessionID // in general, which stays

	after := newEnv(t, &envOptions{db: db, edit: func(string) string { return smallConfig }})
	history := func(id string) []map[string]any {
		var h struct{ Events []map[string]any }
		if st := after.call("GET", "/v1/sessions/"+id+"/history", "", nil, &h); st != 200 {
			t.Fatalf("history: %d", st)
		}
		return h.Events
	}
	var r httpapi.Resumed
	if st := after.call("POST", "/v1/sessions/"+sid+"/resume", "", map[string]any{}, &r); st != 200 {
		t.Fatalf("resume: %d", st)
	}
	note := `mode "ddr" is no longer configured; the session continues in the default mode "general"`
	if r.Snapshot.Mode != "general" || len(r.Notes) != 1 || r.Notes[0] != note {
		t.Fatalf("resumed: mode %s, notes %q", r.Snapshot.Mode, r.Notes)
	}
	events := history(sid)
	last := events[len(events)-1]
	if notes, _ := json.Marshal(last["notes"]); last["kind"] != "resume" || !strings.Contains(string(notes), `no longer configured`) {
		t.Fatalf("the last event is %v", last)
	}
	// opened again, and a session that fits: nothing changes, nothing is recorded
	for _, id := range []string{sid, fits} {
		n := len(history(id))
		if st := after.call("POST", "/v1/sessions/"+id+"/resume", "", nil, &r); st != 200 || len(r.Notes) != 0 || r.Snapshot.Mode != "general" {
			t.Errorf("resume of a session that fits: %d %+v", st, r)
		}
		if len(history(id)) != n {
			t.Errorf("resuming a session that fits recorded something")
		}
	}
	var bad httpapi.ErrorBody
	st := after.call("POST", "/v1/sessions/nope/resume", "", nil, &bad)
	errCode(t, st, bad, http.StatusNotFound, agentplane.CodeNotFound)
	st = after.call("POST", "/v1/sessions/"+sid+"/resume", "", `{"mode":"ddr"}`, &bad)
	errCode(t, st, bad, http.StatusBadRequest, agentplane.CodeInvalidInput)
}
