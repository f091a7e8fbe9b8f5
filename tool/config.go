package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/config"
)

// FromConfig returns the HTTP tools a configuration declares.
func FromConfig(cfg *config.Config, client *http.Client) ([]Tool, error) {
	var out []Tool
	for _, t := range cfg.Tools {
		if t.HTTP == nil {
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		out = append(out, &HTTP{
			S: Spec{Name: t.Name, Usage: t.Description, InputSchema: schema, Impact: Impact(t.Impact), Risk: Risk(t.Risk),
				RequiresConfirmation: t.RequiresConfirmation},
			URL: t.HTTP.URL, Headers: t.HTTP.Headers, Timeout: t.Timeout, Client: client,
		})
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
