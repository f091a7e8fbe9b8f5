package tool

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/resolve"
)

// Names of the built-in tools (agentplane.BuiltinTools).
const (
	GetContextName        = agentplane.ToolGetContext
	CatalogSearchName     = agentplane.ToolCatalogSearch
	NotifyUserName        = agentplane.ToolNotifyUser
	SetModeName           = agentplane.ToolSetMode
	SetActiveEntityName   = agentplane.ToolSetActiveEntity
	ClearActiveEntityName = agentplane.ToolClearActiveEntity
)

// MaxQuery is the longest catalog_search query, in bytes.
const MaxQuery = 256

// Builtins returns every built-in tool (agentplane.BuiltinTools) for a
// configuration: agent_list_modes over its modes, agent_get_context,
// catalog_search over its active catalogs, and the session-changing
// tools. log receives what the tools log; nil discards it.
//
// Their descriptions speak of the configuration's own catalogs and modes,
// never of an example domain.
func Builtins(cfg *config.Config, catalogs Catalogs, log *slog.Logger, notifier Notifier) []Tool {
	ids := make([]string, 0, len(cfg.Catalogs)+1)
	for _, c := range cfg.Catalogs {
		ids = append(ids, c.ID)
	}
	modes := make([]string, len(cfg.Modes))
	for i, m := range cfg.Modes {
		modes[i] = m.Key
	}
	return append([]Tool{ListModes(ConfigModes(cfg), log), GetContext(), CatalogSearch(catalogs, append(ids, agentplane.ModesCatalog)), NotifyUser(notifier)},
		effectTools(modes, ids)...)
}

// oneOf describes a value that is one of names: "one of a, b, c".
func oneOf(what string, names []string) string {
	if len(names) == 0 {
		return what + "."
	}
	return what + ": one of " + strings.Join(names, ", ") + "."
}

// object is the schema of an object with the properties (name → schema),
// those named in required required, and no others.
func object(props map[string]any, required ...string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false})
	return b
}

// NotifyRequest is a notification agent_notify_user asks for: for the
// calling session's user, on the inbox (address USER) or the session's
// floor (address SESSION).
type NotifyRequest struct {
	SessionID, UserID, Address, Title, Body, Urgency string
}

// Notifier emits a notification (the notification bus of agentplane
// serve) and returns what to answer the caller: its id, channel, state.
type Notifier func(ctx context.Context, r NotifyRequest) (json.RawMessage, error)

// NotifyUser returns agent_notify_user over a notifier; with none, each
// call fails saying notifications are not served here.
func NotifyUser(notify Notifier) Tool {
	return &Func{
		S: Spec{
			Name: NotifyUserName,
			Usage: "Sends the user a notification: to their inbox (address USER, the default) or as a note in this conversation (address SESSION). " +
				"Use it for something the user should see later or that must not be lost in the chat; not for ordinary replies.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":1,"maxLength":1024},` +
				`"body":{"type":"string","maxLength":16384},"urgency":{"enum":["LOW","NORMAL","HIGH","CRITICAL"]},"address":{"enum":["USER","SESSION"]}},` +
				`"required":["title"],"additionalProperties":false}`),
			Impact: ImpactInternal,
			Risk:   RiskLow,
		},
		Fn: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			ci, _ := CallInfoFrom(ctx)
			if ci.Session == nil {
				return nil, Errorf("no_session", "the call carries no session")
			}
			if notify == nil {
				return nil, Errorf("unavailable", "notifications are served by agentplane serve, not here")
			}
			var in struct{ Title, Body, Urgency, Address string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, Errorf("bad_args", "%v", err)
			}
			if in.Address == "" {
				in.Address = "USER"
			}
			user := ci.Session.Owner
			if user == "" {
				user = agentplane.LocalPrincipal
			}
			return notify(ctx, NotifyRequest{SessionID: ci.Context.SessionID, UserID: user, Address: in.Address, Title: in.Title, Body: in.Body, Urgency: in.Urgency})
		},
	}
}

// GetContext returns agent_get_context: the session's mode and active work
// context, read from the call's session.
func GetContext() Tool {
	return &Func{
		S: Spec{
			Name: GetContextName,
			Usage: "Returns the session's current mode and active work context: the entity being worked on (type, id, name) and its related entities (the items it belongs with, each with its role). " +
				"Call it when you need to know what the user is working on and it is not already in your context. It only reads; use the mode and entity tools to change them.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
			Impact:      ImpactRead,
			Risk:        RiskLow,
		},
		Fn: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			ci, _ := CallInfoFrom(ctx)
			if ci.Session == nil {
				return nil, Errorf("no_session", "the call carries no session")
			}
			return json.Marshal(map[string]any{"mode": ci.Session.Mode, "awc": ci.Session.AWC})
		},
	}
}

// Catalogs is what catalog_search reads: which sources are active and
// their indexes. router.Registry implements it.
type Catalogs interface {
	SourceActive(mode string, roles []string, src agentplane.ResolverSource) bool
	Source(src agentplane.ResolverSource) (*resolve.Source, bool)
}

// CatalogSearch returns catalog_search: search an active catalog by text,
// so an LLM finds real ids instead of inventing them.
// ids are the configuration's catalogs, named in the schema.
func CatalogSearch(c Catalogs, ids []string) Tool {
	return &Func{
		S: Spec{
			Name: CatalogSearchName,
			Usage: "Searches one of the catalogs active in this session and returns matching items with their ids. " +
				"Call it whenever you need an item's id for another tool: never invent or guess an id. Matching is by name, alias and keyword, tolerant of typos and unfinished words.",
			InputSchema: object(map[string]any{
				"catalog_id": map[string]any{"type": "string", "description": oneOf("The catalog to search", ids)},
				"query":      map[string]any{"type": "string", "maxLength": MaxQuery, "description": "Words of the item's name, alias or keywords."},
				"limit":      map[string]any{"type": "integer", "minimum": 1, "maximum": 20, "description": "Most items to return (default 5)."},
			}, "catalog_id", "query"),
			Impact: ImpactRead,
			Risk:   RiskLow,
		},
		Fn: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct {
				CatalogID string `json:"catalog_id"`
				Query     string `json:"query"`
				Limit     int    `json:"limit"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, Errorf("bad_args", "%v", err)
			}
			ci, _ := CallInfoFrom(ctx)
			if ci.Session == nil {
				return nil, Errorf("no_session", "the call carries no session")
			}
			m, err := SearchSource(ctx, c, resolve.SessionCaller(ci.Session, ci.Context.Principal.Roles, ci.Context.Mode), agentplane.ResolverSource{CatalogID: in.CatalogID}, in.Query, in.Limit)
			if err != nil {
				return nil, err
			}
			return json.Marshal(m)
		},
	}
}

// CatalogItem is an item found in a catalog.
type CatalogItem struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	Description string `json:"description,omitempty"`
}

// CatalogMatches is what a catalog search found: the items, best first,
// the tier they matched at, and whether the match is strict.
type CatalogMatches struct {
	Exact bool          `json:"exact"` // fields in the order catalog_search always wrote them
	Items []CatalogItem `json:"items"`
	Match string        `json:"match"`
}

// SearchSource searches a resolver source (a catalog, or a code-backed
// provider) active in the caller's mode for its roles, as the caller is
// served it (a provider answers per person); it serves catalog_search and
// the web UI's pickers. An empty query lists the source's first items
// (match "all"). limit ≤ 0 means 5; at most 50. Errors are *Error:
// bad_args, inactive_catalog, catalog_unavailable.
func SearchSource(ctx context.Context, c Catalogs, caller resolve.Caller, src agentplane.ResolverSource, query string, limit int) (CatalogMatches, error) {
	if limit <= 0 {
		limit = 5
	}
	limit = min(limit, 50)
	if len(query) > MaxQuery {
		return CatalogMatches{}, Errorf("bad_args", "query is %d bytes; the limit is %d", len(query), MaxQuery)
	}
	ix, err := SourceIndex(ctx, c, caller, src)
	if err != nil {
		return CatalogMatches{}, err
	}
	out := CatalogMatches{Items: []CatalogItem{}}
	var found []int32
	if strings.TrimSpace(query) == "" {
		found, out.Match = ix.Items(limit), "all"
	} else {
		res := ix.Resolve(query, limit)
		found, out.Match, out.Exact = res.Items, res.Tier.String(), res.Strict()
	}
	for _, i := range found {
		it := ix.Item(i)
		out.Items = append(out.Items, CatalogItem{it.Header.ID, it.Header.DisplayName, it.Description})
	}
	return out, nil
}

// SourceIndex returns the index of a catalog or provider active for the
// caller's mode and roles (a provider is asked as the caller), or an
// *Error: inactive_catalog, catalog_unavailable.
func SourceIndex(ctx context.Context, c Catalogs, caller resolve.Caller, src agentplane.ResolverSource) (*resolve.Index, error) {
	if !c.SourceActive(caller.Mode, caller.Roles, src) {
		if src.ProviderID != "" {
			return nil, Errorf("inactive_catalog", "provider %q is not active in mode %q", src.ProviderID, caller.Mode)
		}
		return nil, Errorf("inactive_catalog", "catalog %q is not active in mode %q", src.CatalogID, caller.Mode)
	}
	s, _ := c.Source(src)
	if s.Provided() { // a provider answers the caller, and only them
		ctx = resolve.WithCaller(ctx, caller)
	}
	ix, _, err := s.Index(ctx)
	if err != nil {
		return nil, Errorf("catalog_unavailable", "%v", err)
	}
	return ix, nil
}

// effectTools returns the session-changing built-in tools, for offering
// them to the LLM and MCP clients. The gate runs them through the active
// command that declares them, so a mode or an entity can only be set the
// way the configuration allows; their Call is never used.
func effectTools(modes, catalogs []string) []Tool {
	runsInGate := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, Errorf("internal", "built-in effect tools run in the gate")
	}
	return []Tool{
		&Func{S: Spec{Name: SetModeName,
			Usage: "Switches the session to another mode (see agent_list_modes for the keys and what each mode is for). " +
				"Call it only when the user asked for the change or agreed to your suggestion; never switch on your own.",
			InputSchema: object(map[string]any{"mode": map[string]any{"type": "string", "description": oneOf("The mode's key", modes)}}, "mode"),
			Impact:      ImpactInternal, Risk: RiskLow, Idempotent: true}, Fn: runsInGate},
		&Func{S: Spec{Name: SetActiveEntityName,
			Usage: "Makes an item the session's active work target, loading its related entities. " +
				"Find the id with catalog_search first; never invent one. Call it when the user wants to work on that item.",
			InputSchema: object(map[string]any{
				"catalog_id": map[string]any{"type": "string", "description": oneOf("The item's catalog", catalogs)},
				"id":         map[string]any{"type": "string", "description": "The item's id from the catalog."},
			}, "catalog_id", "id"),
			Impact: ImpactInternal, Risk: RiskLow, Idempotent: true}, Fn: runsInGate},
		&Func{S: Spec{Name: ClearActiveEntityName,
			Usage:       "Closes the session's active work target, when the user is done with it.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
			Impact:      ImpactInternal, Risk: RiskLow, Idempotent: true}, Fn: runsInGate},
	}
}
