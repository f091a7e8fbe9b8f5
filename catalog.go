package agentplane

import "time"

// ModesCatalog is the id of the built-in catalog that lists the modes of a
// configuration; its item ids are mode keys.
const ModesCatalog = "modes"

// EntityHeader identifies an entity. ID is canonical; DisplayName is for
// people and may be stale, so it is never used as identity.
type EntityHeader struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
}

// RelatedEntityRef is an entity related to the active work target, such as
// the audience persona of an email template.
type RelatedEntityRef struct {
	EntityType string       `json:"entity_type"`
	Header     EntityHeader `json:"header"`
	Role       string       `json:"role"` // e.g. "audience", "source", "owner"
}

// ResolverItem is one selectable item of a catalog or provider.
type ResolverItem struct {
	Header      EntityHeader
	Description string
	Aliases     []string
	Keywords    []string
	Related     []RelatedEntityRef // entities that become related when this item is activated
	UsageCount  int64              // informational; breaks ties between equally good matches
}

// Catalog is a resolver catalog: enum-like selectable data. Its items come
// from configuration or, when Provider is set, from a provider fetched and
// cached for TTL.
type Catalog struct {
	ID          string
	DisplayName string
	EntityType  string // the type of entity its items are, e.g. "email_template"
	Items       []ResolverItem
	Provider    *ProviderSpec // items come from here instead of Items
	TTL         time.Duration // how long provider items are cached; 0 means the default
}

// ProviderSpec says where a catalog's items come from when they are not in
// the configuration.
type ProviderSpec struct {
	HTTP *HTTPProviderSpec
}

// HTTPProviderSpec is an HTTP endpoint that answers GET with the items of a
// catalog as JSON.
type HTTPProviderSpec struct {
	URL     string
	Headers map[string]string
	// HeadersEnv are headers whose values are secrets: header name →
	// the environment variable holding the value, read when the runtime
	// starts (an unset variable stops it, naming the variable) and never
	// written anywhere.
	HeadersEnv map[string]string
	Timeout    time.Duration
}

// ResolverSource names where a command's selectable ids come from: exactly
// one of a catalog or a provider registered in Go code.
type ResolverSource struct {
	CatalogID  string `json:"catalog_id,omitempty"`
	ProviderID string `json:"provider_id,omitempty"`
}

// String returns "catalog:ID" or "provider:ID".
func (s ResolverSource) String() string {
	if s.ProviderID != "" {
		return "provider:" + s.ProviderID
	}
	return "catalog:" + s.CatalogID
}

// IsZero reports whether the source names nothing.
func (s ResolverSource) IsZero() bool { return s.CatalogID == "" && s.ProviderID == "" }
