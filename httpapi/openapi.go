package httpapi

import (
	"net/http"

	"github.com/agentplane/agentplane/docs"
)

// serveOpenAPI serves the OpenAPI 3.1 document of the API.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(docs.OpenAPI)
}
