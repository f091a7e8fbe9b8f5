package router_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/router"
)

func ExampleRouter_Route() {
	cfg, _ := demo.Config(nil)
	reg, _ := registry.New(cfg, nil)
	rt, _ := router.New(reg)
	sess := &agentplane.Session{ID: "s1", Mode: "general", Version: 1}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, in := range []agentplane.TurnInput{
		{Text: "switch to DDR mode"},
		{Text: "I want to work on email templates", UI: true},
		{Text: "open the outreach template", UI: true},
		{Text: "should I switch to ddr mode?"},
	} {
		in.Now = now
		d, _ := rt.Route(context.Background(), sess, in)
		fmt.Printf("%-35q %s\n", in.Text, strings.Join(slices.DeleteFunc([]string{string(d.Action), d.CommandID, d.ResolvedID, d.CatalogID, d.ReasonCode}, func(s string) bool { return s == "" }), " "))
	}
	// Output:
	// "switch to DDR mode"                invoke_command set_mode ddr
	// "I want to work on email templates" open_picker set_active_email_template email_templates
	// "open the outreach template"        open_picker set_active_email_template email_templates
	// "should I switch to ddr mode?"      continue_with_llm no_control_intent
}
