// Package docs embeds the published API documents: the OpenAPI 3.1
// description of the HTTP API (openapi.json, built from openapi.src.yaml
// and the protocol's JSON Schemas in schemas/; go test ./httpapi checks it
// is current, and -update rebuilds it).
package docs

import _ "embed"

// OpenAPI is docs/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// OpenAPISource is docs/openapi.src.yaml, what openapi.json is built from.
//
//go:embed openapi.src.yaml
var OpenAPISource []byte
