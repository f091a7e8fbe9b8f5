package router_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
)

// A question without UI names the catalog as people read it: its display
// name with "the" only where the name has no determiner of its own
// ("Which of my loans?", never "Which of the my loans?"), capitalised
// words lowercased and acronyms kept; a catalog without a display name by
// its items' entity type ("Which loan?") or its id. Walked for a launcher
// (the first items) and for candidates short of strict.
func TestQuestionNamesTheCatalog(t *testing.T) {
	for _, c := range []struct {
		display, entityName, which string
	}{
		{"My loans", "", "Which of my loans"},
		{"My Loans", "loan", "Which of my loans"},
		{"Your books", "", "Which of your books"},
		{"The Stacks", "", "Which of the stacks"},
		{"Loans", "loan", "Which of the loans"},
		{"CRM Accounts", "", "Which of the CRM accounts"},
		{"", "loan", "Which loan"},
		{"", "Library loan", "Which library loan"},
		{"", "", "Which of the loans"},
	} {
		t.Run(c.which, func(t *testing.T) {
			y := "version: 1\nmodes: [{key: m, default: true, toolboxes: [t]}]\ntoolboxes: [{id: t, catalogs: [loans], commands: [renew, browse]}]\n"
			if c.entityName != "" {
				y += fmt.Sprintf("entity_types: {loan: {display_name: %q}}\n", c.entityName)
			}
			y += "catalogs:\n  - id: loans\n    entity_type: loan\n"
			if c.display != "" {
				y += fmt.Sprintf("    display_name: %q\n", c.display)
			}
			y += `    items: [{id: B-1, display_name: Dune}, {id: B-2, display_name: Dune Messiah}, {id: B-3, display_name: Emma}]
commands:
  - {id: renew, display_name: Renew a loan, tool: agent_set_active_entity, parameter: loan, resolver: {catalog: loans}, sets_active_context: true, active_entity_type: loan, triggers: ["renew {item}"]}
  - {id: browse, display_name: Browse loans, kind: launcher, target_catalog: loans, on_select: renew, triggers: ["show the loans"]}
`
			cfg, err := config.Parse([]byte(y), "loans.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := compile(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for text, q := range map[string]string{"show the loans": c.which + "?", "renew dun": c.which + " did you mean?"} {
				d, err := r.Route(context.Background(), sessionIn("m"), agentplane.TurnInput{Text: text, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				if d.Action != agentplane.ActionAskQuestion || d.QuestionText != q {
					t.Errorf("%q: %s %q, want the question %q", text, d.Action, d.QuestionText, q)
				}
			}
		})
	}
}
