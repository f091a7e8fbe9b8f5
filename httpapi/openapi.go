package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane/docs"
	"github.com/agentplane/agentplane/docs/schemas"
	"github.com/agentplane/agentplane/tool"
)

// serveOpenAPI serves the OpenAPI 3.1 document of the API.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(docs.OpenAPI)
}

// buildOpenAPI makes docs/openapi.json from its source: the source's
// paths and API types, plus the protocol's JSON Schemas and the mode
// catalog's output schema added to components.schemas — each schema is
// written once, where it is defined. A schema's $defs become components
// named SCHEMA_DEF, and its local references follow them.
func buildOpenAPI(src []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("openapi source: %w", err)
	}
	comps, _ := doc["components"].(map[string]any)
	all, _ := comps["schemas"].(map[string]any)
	if all == nil {
		return nil, fmt.Errorf("openapi source: no components.schemas")
	}
	add := func(name string, raw []byte) error {
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("schema %s: %w", name, err)
		}
		if _, dup := all[name]; dup {
			return fmt.Errorf("schema %s is in the source too", name)
		}
		delete(s, "$schema")
		delete(s, "$id")
		defs, _ := s["$defs"].(map[string]any)
		delete(s, "$defs")
		rename := func(v any) any { return relink(v, name) }
		all[name] = rename(s)
		for d, def := range defs {
			all[name+"_"+d] = rename(def)
		}
		return nil
	}
	for _, name := range schemas.Names {
		raw, err := schemas.File(name)
		if err != nil {
			return nil, err
		}
		var head struct{ Title string }
		json.Unmarshal(raw, &head)
		if err := add(head.Title, raw); err != nil {
			return nil, err
		}
	}
	if err := add("ModeList", tool.ListModes(nil, nil).Spec().OutputSchema); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// relink rewrites a schema's local references (#/$defs/X) to the
// components its definitions became.
func relink(v any, name string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" && strings.HasPrefix(s, "#/$defs/") {
				v[k] = "#/components/schemas/" + name + "_" + strings.TrimPrefix(s, "#/$defs/")
				continue
			}
			v[k] = relink(x, name)
		}
	case []any:
		for i := range v {
			v[i] = relink(v[i], name)
		}
	}
	return v
}
