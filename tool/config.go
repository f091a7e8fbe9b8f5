package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/config"
)

// Program is a tool's implementation in code, which a tool the
// configuration declares names (tools[].program): the declaration gives
// the name, description, impact and schema, the program the behaviour.
type Program func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// FromConfig returns the tools a configuration declares: over HTTP with
// client, or on the named programs.
func FromConfig(cfg *config.Config, client *http.Client, programs map[string]Program) ([]Tool, error) {
	var out []Tool
	for _, t := range cfg.Tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		s := Spec{Name: t.Name, Usage: t.Description, InputSchema: schema, Impact: Impact(t.Impact), Risk: Risk(t.Risk),
			RequiresConfirmation: t.RequiresConfirmation, Idempotent: t.Idempotent}
		switch {
		case t.HTTP != nil:
			out = append(out, &HTTP{S: s, URL: t.HTTP.URL, Headers: t.HTTP.Headers, Timeout: t.Timeout, Client: client})
		case t.Program != "":
			fn := programs[t.Program]
			if fn == nil {
				return nil, fmt.Errorf("tool %s: no program %q", t.Name, t.Program)
			}
			out = append(out, &Func{S: s, Fn: fn})
		}
	}
	return out, nil
}

// ConfigModes is a ModeCatalog over a configuration's modes.
func ConfigModes(cfg *config.Config) ModeCatalog {
	return ModeCatalogFunc(func(context.Context) ([]ModeSummary, error) {
		out := make([]ModeSummary, len(cfg.Modes))
		for i, m := range cfg.Modes {
			out[i] = ModeSummary{ID: m.ID, Key: m.Key, DisplayName: m.DisplayName, Description: m.Description,
				SystemPromptSummary: m.SystemPromptSummary, IsDefault: m.Default,
				HumanRoleHints: m.HumanRoleHints, ExampleUtterances: m.ExampleUtterances}
		}
		return out, nil
	})
}
