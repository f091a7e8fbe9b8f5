package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/tool"
)

// What a bound session offers besides tools: resources (its state, its
// work context, its audit chain, the active catalogs and their items),
// a prompt per mode, and completions of prompt and resource-template
// arguments from the resolver — all scoped to the principal and to the
// session's mode.
const (
	// URISession is the session's state snapshot (subscribable).
	URISession = "agentplane://session"
	// URIContext is the session's active work context (subscribable).
	URIContext = "agentplane://session/context"
	// URIAudit is the newest page of the session's audit chain; earlier
	// pages are URIAudit?before=SEQ.
	URIAudit = "agentplane://session/audit"

	templateAudit       = URIAudit + "{?before}"
	templateCatalog     = "agentplane://catalogs/{catalog}{?offset}"
	templateCatalogItem = "agentplane://catalogs/{catalog}/items/{id}"
	templateProvider    = "agentplane://providers/{provider}{?offset}"
	templateProvItem    = "agentplane://providers/{provider}/items/{id}"

	// ResourcePage is how many items or records a resource read holds.
	ResourcePage = 100
	// MaxCompletions is how many values a completion returns (the
	// protocol's limit).
	MaxCompletions = 100
)

// sourceURI is the resource of a catalog or provider.
func sourceURI(src agentplane.ResolverSource) string {
	if src.ProviderID != "" {
		return "agentplane://providers/" + url.PathEscape(src.ProviderID)
	}
	return "agentplane://catalogs/" + url.PathEscape(src.CatalogID)
}

// parseSourceURI reads agentplane://catalogs/ID[/items/ITEM][?offset=N]
// (or providers/…): the source, the item ("" for a page) and the offset.
func parseSourceURI(raw string) (src agentplane.ResolverSource, item string, offset int, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "agentplane" || u.Host != "catalogs" && u.Host != "providers" {
		return src, "", 0, fmt.Errorf("not a catalog resource: %q", raw)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
	case len(parts) == 3 && parts[0] != "" && parts[1] == "items" && parts[2] != "":
		item = parts[2]
	default:
		return src, "", 0, fmt.Errorf("resource %q: want agentplane://%s/ID or agentplane://%s/ID/items/ITEM", raw, u.Host, u.Host)
	}
	if u.Host == "catalogs" {
		src.CatalogID = parts[0]
	} else {
		src.ProviderID = parts[0]
	}
	if v := u.Query().Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return src, "", 0, fmt.Errorf("resource %q: offset=%q: want a non-negative integer", raw, v)
		}
	}
	return src, item, offset, nil
}

// activeSources are the catalogs and providers active in the mode for the
// principal's roles, in configuration order.
func (b *binding) activeSources(mode string) []agentplane.ResolverSource {
	var out []agentplane.ResolverSource
	for _, tb := range b.s.core.View().Registry().ActiveToolboxes(mode, b.p.Roles) {
		for _, id := range tb.Catalogs {
			if src := (agentplane.ResolverSource{CatalogID: id}); !slices.Contains(out, src) {
				out = append(out, src)
			}
		}
		for _, id := range tb.Providers {
			if src := (agentplane.ResolverSource{ProviderID: id}); !slices.Contains(out, src) {
				out = append(out, src)
			}
		}
	}
	return out
}

// addResources registers what does not change with the mode: the
// session's own resources, the templates and the mode prompts.
func (b *binding) addResources() {
	b.srv.AddResource(&mcp.Resource{URI: URISession, Name: "session", Title: "This session's state",
		Description: "The agentplane session this MCP session is bound to: its mode, version, active work context and pending confirmation, as JSON. Subscribe to hear when it changes.",
		MIMEType:    "application/json"}, b.readSession)
	b.srv.AddResource(&mcp.Resource{URI: URIContext, Name: "work-context", Title: "Active work context",
		Description: "The entity the session is working on and its related entities (empty when nothing is open). Subscribe to hear when it changes.",
		MIMEType:    "application/json"}, b.readSession)
	b.srv.AddResource(&mcp.Resource{URI: URIAudit, Name: "audit", Title: "Audit chain (newest records)",
		Description: fmt.Sprintf("The session's hash-chained audit records, the newest %d as JSON Lines; earlier pages are %s?before=SEQ.", ResourcePage, URIAudit),
		MIMEType:    "application/jsonl"}, b.readAudit)
	b.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: templateAudit, Name: "audit-page", Title: "Audit chain, a page",
		Description: "The session's audit records before a sequence number, as JSON Lines.", MIMEType: "application/jsonl"}, b.readAudit)
	for _, t := range []struct{ uri, name, title, desc string }{
		{templateCatalog, "catalog", "A catalog's items", "The items of a catalog active in this session's mode, a page at a time (offset); complete {catalog} for the ids."},
		{templateCatalogItem, "catalog-item", "A catalog item", "One item of an active catalog: its name, description, aliases and related entities; complete {id} to find it by name, alias or typo."},
		{templateProvider, "provider", "A provider's items", "The items a provider active in this session's mode gives this principal, a page at a time."},
		{templateProvItem, "provider-item", "A provider's item", "One item a provider gives; complete {id} to find it."},
	} {
		b.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: t.uri, Name: t.name, Title: t.title, Description: t.desc, MIMEType: "application/json"}, b.readSource)
	}
	b.addPrompts()
}

// syncResources lists a resource per catalog and provider active in the
// mode (b.mu is held); the SDK tells clients when the list changed.
func (b *binding) syncResources(mode string) {
	var uris []string
	for _, src := range b.activeSources(mode) {
		uri := sourceURI(src)
		uris = append(uris, uri)
		if slices.Contains(b.sources, uri) {
			continue
		}
		title, desc := src.CatalogID, "A catalog active in this session's mode: its items, a page at a time."
		if src.ProviderID != "" {
			title, desc = src.ProviderID, "A provider active in this session's mode: the items it gives this principal, a page at a time."
		} else if c, ok := b.s.core.View().Registry().Catalog(src.CatalogID); ok && c.DisplayName != "" {
			title = c.DisplayName
		}
		b.srv.AddResource(&mcp.Resource{URI: uri, Name: strings.TrimPrefix(uri, "agentplane://"), Title: title, Description: desc,
			MIMEType: "application/json"}, b.readSource)
	}
	if gone := missing(b.sources, uris); len(gone) > 0 {
		b.srv.RemoveResources(gone...)
	}
	b.sources = uris
}

// textResource is a read's answer: one text content.
func textResource(uri, mime string, data []byte) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: string(data)}}}
}

// bound returns the bound session, opened if need be.
func (b *binding) bound(ctx context.Context) (*agentplane.Session, error) {
	id, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	return b.s.core.Session(ctx, id)
}

func (b *binding) readSession(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess, err := b.bound(ctx)
	if err != nil {
		return nil, err
	}
	var v any = sess.Snapshot(b.s.core.Now())
	if req.Params.URI == URIContext {
		v = sess.AWC
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return textResource(req.Params.URI, "application/json", data), nil
}

func (b *binding) readAudit(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	u, err := url.Parse(req.Params.URI)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	var before int64
	if v := u.Query().Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 1 {
			return nil, invalidParams("resource %q: before=%q: want a sequence number (1 or more)", req.Params.URI, v)
		}
	}
	id, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := b.s.core.Page(ctx, id, before, 0, ResourcePage)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, r := range recs {
		buf.Write(r.Raw)
		buf.WriteByte('\n')
	}
	return textResource(req.Params.URI, "application/jsonl", buf.Bytes()), nil
}

// SourcePage is a catalog or provider resource: a page of its items.
type SourcePage struct {
	CatalogID   string       `json:"catalog_id,omitempty"`
	ProviderID  string       `json:"provider_id,omitempty"`
	DisplayName string       `json:"display_name,omitempty"`
	EntityType  string       `json:"entity_type,omitempty"`
	Total       int          `json:"total"`
	Offset      int          `json:"offset"`
	Items       []SourceItem `json:"items"`
	Next        string       `json:"next,omitempty"` // the next page's URI
}

// SourceItem is an item as a resource shows it.
type SourceItem struct {
	ID          string                        `json:"id"`
	DisplayName string                        `json:"display_name"`
	Description string                        `json:"description,omitempty"`
	Aliases     []string                      `json:"aliases,omitempty"`
	Related     []agentplane.RelatedEntityRef `json:"related,omitempty"`
	URI         string                        `json:"uri"`
}

func (b *binding) readSource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	src, item, offset, err := parseSourceURI(req.Params.URI)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	sess, err := b.bound(ctx)
	if err != nil {
		return nil, err
	}
	ix, err := tool.SourceIndex(ctx, b.s.core.View().Registry(), resolve.SessionCaller(sess, b.p.Roles, ""), src)
	var te *tool.Error
	if errors.As(err, &te) && te.Code == "inactive_catalog" {
		return nil, mcp.ResourceNotFoundError(req.Params.URI) // as for a catalog that does not exist: this principal, in this mode, has no such resource
	}
	if err != nil {
		return nil, err
	}
	base := sourceURI(src)
	itemOf := func(it *agentplane.ResolverItem, full bool) SourceItem {
		si := SourceItem{ID: it.Header.ID, DisplayName: it.Header.DisplayName, Description: it.Description, URI: base + "/items/" + url.PathEscape(it.Header.ID)}
		if full {
			si.Aliases, si.Related = it.Aliases, it.Related
		}
		return si
	}
	var v any
	if item != "" {
		it, ok := ix.Lookup(item)
		if !ok {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		v = itemOf(it, true)
	} else {
		page := SourcePage{CatalogID: src.CatalogID, ProviderID: src.ProviderID, Total: ix.Len(), Offset: offset, Items: []SourceItem{}}
		if c, ok := b.s.core.View().Registry().Catalog(src.CatalogID); ok {
			page.DisplayName, page.EntityType = c.DisplayName, c.EntityType
		}
		for i := offset; i < ix.Len() && i < offset+ResourcePage; i++ {
			page.Items = append(page.Items, itemOf(ix.Item(int32(i)), false))
		}
		if offset+ResourcePage < ix.Len() {
			page.Next = fmt.Sprintf("%s?offset=%d", base, offset+ResourcePage)
		}
		v = page
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return textResource(req.Params.URI, "application/json", data), nil
}

// invalidParams is a JSON-RPC invalid-params error with the message.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}
