package httpapi_test

import (
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/tool"
)

// A launcher with a target mode opens its picker on a catalog of that
// mode: the picker's items are asked for with the decision's target_mode
// (they were asked for in the session's mode, where the catalog is not
// active, and the picker opened empty), and only where a launcher active
// in the session opens that catalog in that mode; the command the
// selection runs, of the target mode, has its display name for the page.
func TestPickerOfALaunchersTargetMode(t *testing.T) {
	media, err := os.ReadFile("../examples/media/agentplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, &envOptions{edit: func(string) string { return string(media) }})
	sid := e.create("", map[string]any{"ui": true}).SessionID
	ui := true
	a := e.turn("", sid, httpapi.TurnBody{Text: "show the tickets", UI: &ui})
	d := a.Decision
	if d.Action != agentplane.ActionOpenPicker || d.CatalogID != "tickets" || d.TargetMode != "support" || d.CommandID != "open_ticket" || a.Snapshot.Mode != "home" {
		t.Fatalf("the launcher decided %+v in mode %s", d, a.Snapshot.Mode)
	}
	items := "/v1/sessions/" + sid + "/catalogs/tickets/items"
	for _, c := range []struct {
		query  string
		status int
		ids    []string
	}{
		{"?mode=support", 200, []string{"T-7", "T-12", "T-31"}},
		{"?mode=support&q=export", 200, []string{"T-12"}},
		{"", 404, nil},              // the session's mode: not active there
		{"?mode=home", 404, nil},    // the same, said
		{"?mode=nowhere", 404, nil}, // no such mode
		{"?mode=SUPPORT", 404, nil}, // modes are keys, exactly
		{"?mode=support&q=", 200, []string{"T-7", "T-12", "T-31"}},
	} {
		var m tool.CatalogMatches
		var bad httpapi.ErrorBody
		out := any(&m)
		if c.status != 200 {
			out = &bad
		}
		st := e.call("GET", items+c.query, "", nil, out)
		if st != c.status {
			t.Errorf("GET items%s: %d %+v, want %d", c.query, st, bad, c.status)
			continue
		}
		if c.status != 200 {
			if bad.Error.Code != agentplane.CodeNotFound {
				t.Errorf("GET items%s: %+v", c.query, bad)
			}
			continue
		}
		var ids []string
		for _, it := range m.Items {
			ids = append(ids, it.ID)
		}
		slices.Sort(ids)
		if want := slices.Sorted(slices.Values(c.ids)); !slices.Equal(ids, want) {
			t.Errorf("GET items%s: %v, want %v", c.query, ids, c.ids)
		}
	}
	// no launcher of the session opens another catalog in that mode
	if st := e.call("GET", "/v1/sessions/"+sid+"/catalogs/albums/items?mode=support", "", nil, nil); st != http.StatusNotFound {
		t.Errorf("albums in the support mode: %d", st)
	}
	var cl httpapi.CommandList
	if st := e.call("GET", "/v1/sessions/"+sid+"/commands", "", nil, &cl); st != 200 || cl.CommandNames["open_ticket"] != "Work on a ticket" || cl.CommandNames["browse_tickets"] != "Browse tickets" {
		t.Fatalf("commands: %d %+v", st, cl.CommandNames)
	}
	for _, c := range cl.Commands {
		if c.ID == "open_ticket" {
			t.Fatal("open_ticket is listed as active in the home mode")
		}
	}
	// the picker's selection runs in the target mode
	a = e.turn("", sid, httpapi.TurnBody{Selection: &agentplane.Selection{CommandID: "open_ticket", ID: "T-12"}})
	if a.Result == nil || a.Result.Status != "success" || a.Snapshot.Mode != "support" || a.Snapshot.AWC.Entity == nil || a.Snapshot.AWC.Entity.ID != "T-12" {
		t.Fatalf("the selection: %+v %+v", a.Decision, a.Snapshot)
	}
}
