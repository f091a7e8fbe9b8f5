package resolve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/internal/httpbody"
	"github.com/agentplane/agentplane/internal/sameorigin"
	"github.com/agentplane/agentplane/telemetry"
)

// MaxProviderBody is the largest response an HTTP provider may send.
const MaxProviderBody = 64 << 20

// HTTPProvider fetches items with GET from a URL. The response is a JSON
// array of items, or an object with an "items" array; an item is
//
//	{"id": "LIST-9", "display_name": "Q1 pilot list", "description": "...",
//	 "aliases": [...], "keywords": [...], "usage_count": 3,
//	 "related": [{"entity_type": "persona", "id": "PERS-22", "display_name": "...", "role": "audience"}]}
type HTTPProvider struct {
	URL     string
	Headers map[string]string
	Timeout time.Duration // per fetch; 5s if zero
	// Client sends the request; nil means http.DefaultClient. Either way a
	// redirect to another origin is refused (it would carry the configured
	// headers there).
	Client *http.Client
}

// ContextHeader is the request header in which an HTTP provider is told
// who asks (Caller): {"principal": {"user_id", "roles"}, "mode",
// "active_work_context"} as JSON, non-ASCII characters escaped. Items are
// cached per caller, so a provider may answer each person with their own.
const ContextHeader = "Agentplane-Context"

// header is the caller as ContextHeader carries it.
func (c Caller) header() string {
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	b, _ := json.Marshal(struct {
		Principal agentplane.ContextPrincipal  `json:"principal"`
		Mode      string                       `json:"mode"`
		AWC       agentplane.ActiveWorkContext `json:"active_work_context"`
	}{agentplane.ContextPrincipal{UserID: c.UserID, Roles: roles}, c.Mode, c.AWC})
	var out strings.Builder
	for _, r := range string(b) { // header values are ASCII
		if r < 0x80 {
			out.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&out, `\u%04x`, u)
		}
	}
	return out.String()
}

// WireItem is the JSON form of a resolver item, shared by HTTP providers
// and configuration files.
type WireItem struct {
	ID          string        `json:"id" yaml:"id"`
	DisplayName string        `json:"display_name" yaml:"display_name"`
	Description string        `json:"description,omitempty" yaml:"description"`
	Aliases     []string      `json:"aliases,omitempty" yaml:"aliases"`
	Keywords    []string      `json:"keywords,omitempty" yaml:"keywords"`
	Related     []WireRelated `json:"related,omitempty" yaml:"related"`
	UsageCount  int64         `json:"usage_count,omitempty" yaml:"usage_count"`
}

// WireRelated is the JSON form of a related entity reference.
type WireRelated struct {
	EntityType  string `json:"entity_type" yaml:"entity_type"`
	ID          string `json:"id" yaml:"id"`
	DisplayName string `json:"display_name" yaml:"display_name"`
	Role        string `json:"role" yaml:"role"`
}

// Item converts the wire form to the domain type.
func (w *WireItem) Item() agentplane.ResolverItem {
	it := agentplane.ResolverItem{
		Header:      agentplane.EntityHeader{ID: w.ID, DisplayName: w.DisplayName},
		Description: w.Description,
		Aliases:     w.Aliases,
		Keywords:    w.Keywords,
		UsageCount:  w.UsageCount,
	}
	for _, r := range w.Related {
		it.Related = append(it.Related, agentplane.RelatedEntityRef{
			EntityType: r.EntityType, Role: r.Role,
			Header: agentplane.EntityHeader{ID: r.ID, DisplayName: r.DisplayName},
		})
	}
	return it
}

// Check reports the first problem of the item: a missing id, or a related
// entity without entity type, id or role.
func (w *WireItem) Check() error {
	if w.ID == "" {
		return errors.New("missing id")
	}
	for i, r := range w.Related {
		if r.EntityType == "" || r.ID == "" || r.Role == "" {
			return fmt.Errorf("related[%d]: needs entity_type, id and role", i)
		}
	}
	return nil
}

// Items fetches and decodes the items. Its errors never quote the values
// of the headers it sent (a service that echoes them).
func (p *HTTPProvider) Items(ctx context.Context) ([]agentplane.ResolverItem, error) {
	items, err := p.items(ctx)
	return items, httpbody.Masked(err, p.Headers)
}

func (p *HTTPProvider) items(ctx context.Context) ([]agentplane.ResolverItem, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", p.URL, err)
	}
	for k, v := range p.Headers { // first: what agentplane sets is not the configuration's to change
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "application/json")
	telemetry.InjectHTTP(ctx, req.Header) // traceparent, when the call is traced
	req.Header.Del(ContextHeader)
	if c, ok := CallerFrom(ctx); ok {
		req.Header.Set(ContextHeader, c.header())
	}
	resp, err := sameorigin.Client(p.Client).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", p.URL, err)
	}
	defer resp.Body.Close()
	body, tooLarge, err := httpbody.Read(resp.Body, MaxProviderBody)
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", p.URL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("GET %s: status %d: %s", p.URL, resp.StatusCode, httpbody.Snippet(body))
	}
	if tooLarge {
		return nil, fmt.Errorf("GET %s: body larger than %d bytes", p.URL, MaxProviderBody)
	}
	return DecodeItems(body)
}

// DecodeItems decodes a JSON array of items, or an object with an "items"
// array, and checks every item.
func DecodeItems(body []byte) ([]agentplane.ResolverItem, error) {
	if err := canonjson.Check(body); err != nil {
		return nil, fmt.Errorf("decode items: %w (got %s)", err, httpbody.Snippet(body))
	}
	var wire []WireItem
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var obj struct {
			Items []WireItem `json:"items"`
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, fmt.Errorf("decode items: %w", err)
		}
		wire = obj.Items
	} else if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("decode items: %w (want a JSON array of items or {\"items\": [...]}; got %s)", err, httpbody.Snippet(body))
	}
	items := make([]agentplane.ResolverItem, len(wire))
	for i := range wire {
		if err := wire[i].Check(); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		items[i] = wire[i].Item()
	}
	return items, nil
}
