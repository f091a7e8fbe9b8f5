package router_test

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/router"
)

// propertyConfig extends a demo-like configuration with a role-gated
// code-backed provider, so the properties cover role gating and providers.
const propertyConfig = `version: 1
modes:
  - {key: general, default: true, toolboxes: [core, templates, crm]}
  - {key: sales, toolboxes: [core, templates, mailing, archive]}
toolboxes:
  - {id: core, catalogs: [modes], commands: [set_mode]}
  - {id: templates, catalogs: [email_templates], commands: [open_templates, set_template]}
  - {id: mailing, catalogs: [mailer_lists], commands: [send]}
  - {id: archive, commands: [archive_template]}
  - {id: crm, providers: [accounts], commands: [open_account], required_roles: [admin]}
catalogs:
  - id: email_templates
    entity_type: email_template
    items:
      - {id: TPL-1, display_name: Q1 CFO Outreach, aliases: [cfo outreach]}
      - {id: TPL-2, display_name: Q1 CTO Outreach}
      - {id: TPL-3, display_name: Renewal Reminder}
  - id: mailer_lists
    items:
      - {id: L-1, display_name: Q1 pilot list}
      - {id: L-2, display_name: Q2 pilot list}
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true, aliases: [mode],
     triggers: ["(switch|go) to [the] {item} mode"]}
  - {id: open_templates, kind: launcher, target_catalog: email_templates, on_select: set_template, triggers: ["[show] [the] templates"]}
  - {id: set_template, tool: agent_set_active_entity, parameter: t, resolver: {catalog: email_templates}, sets_active_context: true,
     triggers: ["open [the] {item} [template]"]}
  - {id: send, tool: agent_set_mode, parameter: l, resolver: {catalog: mailer_lists}, requires_confirmation: true,
     triggers: ["send (it|this) to [the] {item}"]}
  - {id: archive_template, tool: agent_clear_active_entity, parameter: t, resolver: {catalog: email_templates}, clears_active_context: true,
     triggers: ["archive [the] {item} [template]"]}
  - {id: open_account, tool: agent_set_active_entity, parameter: a, resolver: {provider: accounts}, sets_active_context: true, active_entity_type: account,
     triggers: ["open [the] {item} account"]}
`

var vocabulary = []string{
	"switch", "go", "to", "the", "mode", "general", "sales", "ddr", "open", "template", "templates", "show",
	"send", "it", "this", "q1", "q2", "cfo", "cto", "outreach", "renewal", "reminder", "pilot", "list",
	"account", "acme", "archive", "yes", "no", "please", "can", "you", "1", "2", "3", "/mode", "/send", "/open_account",
	"don't", "should", "i", "?", "!", "Q1 CFO Outreach", "Acme Corp", "é",
}

func TestRouteProperties(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int64
	accounts := resolve.ProviderFunc(func(context.Context) ([]agentplane.ResolverItem, error) {
		fetches.Add(1)
		return []agentplane.ResolverItem{{Header: agentplane.EntityHeader{ID: "ACC-1", DisplayName: "Acme Corp"}}}, nil
	})
	opts := &registry.Options{Providers: map[string]resolve.Provider{"accounts": accounts}}
	cfg, err := config.Parse([]byte(propertyConfig), "property.yaml", opts.ConfigOptions())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := compile(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		mode := rapid.SampledFrom([]string{"general", "sales"}).Draw(rt, "mode")
		admin := rapid.Bool().Draw(rt, "admin")
		var roles []string
		if admin {
			roles = []string{"admin"}
		}
		sess := &agentplane.Session{ID: "s", Mode: mode, Version: 1}
		if rapid.Bool().Draw(rt, "pendingConfirm") {
			sess.PendingConfirmation = &agentplane.PendingConfirmation{CommandID: "send", ResolvedID: "L-1", ExpiresAt: now.Add(time.Duration(rapid.IntRange(-60, 60).Draw(rt, "ttl")) * time.Second)}
		}
		if rapid.Bool().Draw(rt, "pendingPicker") {
			cmd := rapid.SampledFrom([]string{"set_template", "open_account", "send"}).Draw(rt, "pickerCmd")
			c, _ := reg.Registry().Command(cmd)
			sess.PendingPicker = &agentplane.PendingPicker{CommandID: cmd, Source: c.Source, OptionIDs: []string{"TPL-1", "L-2", "ACC-1"}, ExpiresAt: now.Add(time.Minute)}
		}
		words := rapid.SliceOfN(rapid.SampledFrom(vocabulary), 0, 8).Draw(rt, "words")
		in := agentplane.TurnInput{Text: strings.Join(words, " "), UI: rapid.Bool().Draw(rt, "ui"), Roles: roles, Now: now}
		if rapid.IntRange(0, 9).Draw(rt, "selection") == 0 {
			in.Selection = &agentplane.Selection{
				CommandID: rapid.SampledFrom([]string{"set_mode", "set_template", "send", "open_account", "open_templates", "nope"}).Draw(rt, "selCmd"),
				ID:        rapid.SampledFrom([]string{"sales", "TPL-2", "L-1", "ACC-1", "zzz"}).Draw(rt, "selID"),
			}
		}
		before := fetches.Load()
		d1, err1 := reg.Route(ctx, sess, in)
		d2, err2 := reg.Route(ctx, sess, in)
		if !reflect.DeepEqual(d1, d2) || agentplane.ErrorCode(err1) != agentplane.ErrorCode(err2) {
			rt.Fatalf("not deterministic:\n%+v %v\n%+v %v", d1, err1, d2, err2)
		}
		if !admin && fetches.Load() != before {
			rt.Fatalf("the role-gated provider was fetched for a principal without the role")
		}
		if err1 != nil {
			if in.Selection == nil {
				rt.Fatalf("error without a selection: %v", err1)
			}
			return
		}
		checkOneAction(rt, reg, mode, roles, d1)
	})
}

// checkOneAction asserts the decision is exactly one well-formed action that
// names only active commands and sources, and only ids that exist.
func checkOneAction(rt *rapid.T, reg *router.Router, mode string, roles []string, d agentplane.Decision) {
	if len(d.Trace) == 0 {
		rt.Fatalf("no trace: %+v", d)
	}
	activeCmd := func(id string) {
		if !reg.Registry().CommandActive(mode, roles, id) {
			rt.Fatalf("decision names inactive command %q in mode %s roles %v: %+v", id, mode, roles, d)
		}
	}
	switch d.Action {
	case agentplane.ActionInvokeCommand:
		if d.CommandID == "" || d.ResolvedID == "" || d.ReasonCode != "" || d.QuestionText != "" {
			rt.Fatalf("malformed invoke_command: %+v", d)
		}
		activeCmd(d.CommandID)
		cmd, _ := reg.Registry().Command(d.CommandID)
		if !reg.Registry().SourceActive(mode, roles, cmd.Source) {
			rt.Fatalf("invoke on inactive source: %+v", d)
		}
		src, _ := reg.Registry().Source(cmd.Source)
		ix, _, _ := src.Index(context.Background())
		if _, ok := ix.Lookup(d.ResolvedID); !ok {
			rt.Fatalf("invented id %q: %+v", d.ResolvedID, d)
		}
		if cmd.NeedsConfirmation() && !d.Confirmed {
			rt.Fatalf("invoked a confirmation-requiring command without confirmation: %+v", d)
		}
	case agentplane.ActionOpenPicker:
		if (d.CatalogID == "") == (d.ProviderID == "") || d.CommandID == "" {
			rt.Fatalf("malformed open_picker: %+v", d)
		}
		activeCmd(d.CommandID)
		if !reg.Registry().SourceActive(mode, roles, d.Source()) {
			rt.Fatalf("picker on inactive source: %+v", d)
		}
	case agentplane.ActionAskQuestion:
		if d.QuestionText == "" || len(d.Options) == 0 || d.CommandID == "" {
			rt.Fatalf("malformed question: %+v", d)
		}
		activeCmd(d.CommandID)
	case agentplane.ActionContinueLLM:
		if d.ReasonCode == "" || d.CommandID != "" {
			rt.Fatalf("malformed continue_with_llm: %+v", d)
		}
	default:
		rt.Fatalf("unknown action %q", d.Action)
	}
}
