package router_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/router"
)

// TestNewAfterRetrainsWhatChanged builds routers for a configuration
// after the router of another: with the same examples the earlier model
// serves, with changed examples a new one is trained — either way every
// decision is the one router.New makes from scratch.
func TestNewAfterRetrainsWhatChanged(t *testing.T) {
	build := func(yaml string, prev *router.Router) (*router.Router, *registry.Registry) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml), "after.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := registry.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := router.NewAfter(reg, prev)
		if err != nil {
			t.Fatal(err)
		}
		return r, reg
	}
	radar := strings.Replace(examplesConfig, "examples: [show weather alerts, list the storm warnings]",
		"examples: [open the radar view, show me the rain radar]", 1)
	if radar == examplesConfig {
		t.Fatal("the test's configuration edit did not apply")
	}
	texts := []string{"which towns do you know about", "will it rain in paris tomorrow", "list the weather alerts",
		"show me the rain radar", "open the radar view please", "i had pasta for lunch", "list the storm warnings"}
	first, _ := build(examplesConfig, nil)
	for _, tc := range []struct {
		name string
		yaml string
	}{{"same examples", examplesConfig}, {"changed examples", radar}} {
		t.Run(tc.name, func(t *testing.T) {
			after, _ := build(tc.yaml, first)
			fresh, _ := build(tc.yaml, nil)
			for _, text := range texts {
				in := agentplane.TurnInput{Text: text, UI: true, Now: now}
				got, _ := after.Route(context.Background(), sessionIn("general"), in)
				want, _ := fresh.Route(context.Background(), sessionIn("general"), in)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%q: after an earlier router %+v, from scratch %+v", text, got, want)
				}
			}
		})
	}
	after, _ := build(radar, first)
	d, _ := after.Route(context.Background(), sessionIn("general"), agentplane.TurnInput{Text: "show me the rain radar", UI: true, Now: now})
	if d.Action != agentplane.ActionOpenPicker || !strings.Contains(strings.Join(d.Trace, "\n"), "open_alerts") {
		t.Errorf("the changed examples were not learnt: %+v", d)
	}
}
