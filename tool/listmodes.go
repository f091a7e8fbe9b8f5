package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/agentplane/agentplane"
)

// ListModesName is the name of the mode catalog tool (TUL-010).
const ListModesName = agentplane.ToolListModes

// ListModesUsage is the usage guidance the LLM reads for agent_list_modes.
const ListModesUsage = `Lists the agent's modes with what each is for: id, key, display name, description, a summary of how prompts behave in it, whether it is the default, the human roles it suits and, with includeExamples, example requests.
Call it when the user asks which modes exist, wants help understanding or choosing between modes, or when you are about to propose a mode change and want to present the options with their descriptions.
Do not call it on every message, nor when you already know the current mode and need no options. It only reads: it never changes the mode — the mode-change tool (agent_set_mode) does that.`

// ModeSummary is one mode as the mode catalog service returns it.
type ModeSummary struct {
	ID                  string
	Key                 string
	DisplayName         string
	Description         string
	SystemPromptSummary string
	IsDefault           bool
	HumanRoleHints      []string
	ExampleUtterances   []string
}

// ModeCatalog is the mode catalog service agent_list_modes reads.
type ModeCatalog interface {
	AllModes(ctx context.Context) ([]ModeSummary, error)
}

// ModeCatalogFunc adapts a function to ModeCatalog.
type ModeCatalogFunc func(ctx context.Context) ([]ModeSummary, error)

// AllModes calls f.
func (f ModeCatalogFunc) AllModes(ctx context.Context) ([]ModeSummary, error) { return f(ctx) }

// listModes is the agent_list_modes tool.
type listModes struct {
	catalog ModeCatalog
	log     *slog.Logger
}

// ListModes returns the read-only agent_list_modes tool over the catalog.
// A nil or failing catalog makes each call fail with a concise error, which
// is logged; the tool never panics out of Call. log nil discards the log.
func ListModes(catalog ModeCatalog, log *slog.Logger) Tool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &listModes{catalog: catalog, log: log}
}

// Spec returns the tool's spec.
func (t *listModes) Spec() Spec {
	return Spec{
		Name:  ListModesName,
		Usage: ListModesUsage,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"includeExamples":{"type":"boolean",` +
			`"description":"Include example utterances for each mode, when the catalog has them."}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","required":["modes"],"properties":{"modes":{"type":"array","items":{"type":"object",` +
			`"required":["id","key","displayName","description","systemPromptSummary","isDefault"]}}}}`),
		Impact: ImpactRead,
		Risk:   RiskLow,
	}
}

// modeJSON is the published shape of one mode (camelCase, per TUL-010).
type modeJSON struct {
	ID                  string   `json:"id"`
	Key                 string   `json:"key"`
	DisplayName         string   `json:"displayName"`
	Description         string   `json:"description"`
	SystemPromptSummary string   `json:"systemPromptSummary"`
	IsDefault           bool     `json:"isDefault"`
	HumanRoleHints      []string `json:"humanRoleHints"`
	ExampleUtterances   []string `json:"exampleUtterances"`
}

// Call lists the modes.
func (t *listModes) Call(ctx context.Context, args json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil { // a catalog's bug is a failed call, not a crash
			t.log.Error("agent_list_modes: mode catalog panicked", "panic", fmt.Sprint(r))
			out, err = nil, Errorf("catalog_unavailable", "the mode catalog failed")
		}
	}()
	var in struct {
		IncludeExamples bool `json:"includeExamples"`
	}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, Errorf("bad_args", "includeExamples must be a boolean")
		}
	}
	if t.catalog == nil {
		t.log.Error("agent_list_modes: no mode catalog configured")
		return nil, Errorf("catalog_unavailable", "no mode catalog is configured")
	}
	modes, err := t.catalog.AllModes(ctx)
	if err != nil {
		t.log.Error("agent_list_modes: mode catalog failed", "err", err)
		return nil, Errorf("catalog_unavailable", "the mode catalog failed: %v", err)
	}
	if modes == nil {
		t.log.Error("agent_list_modes: mode catalog returned nothing")
		return nil, Errorf("catalog_unavailable", "the mode catalog returned no list")
	}
	list := make([]modeJSON, len(modes))
	for i, m := range modes {
		list[i] = modeJSON{ID: m.ID, Key: m.Key, DisplayName: m.DisplayName, Description: m.Description,
			SystemPromptSummary: m.SystemPromptSummary, IsDefault: m.IsDefault,
			HumanRoleHints: nonNil(m.HumanRoleHints), ExampleUtterances: []string{}}
		if in.IncludeExamples {
			list[i].ExampleUtterances = nonNil(m.ExampleUtterances)
		}
	}
	return json.Marshal(map[string]any{"modes": list})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
