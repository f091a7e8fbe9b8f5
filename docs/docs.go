// Package docs embeds the published API documents: the OpenAPI 3.1
// description of the HTTP API (openapi.json, built from openapi.src.json
// and the protocol's JSON Schemas in schemas/; see httpapi's tests).
package docs

import _ "embed"

// OpenAPI is docs/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
