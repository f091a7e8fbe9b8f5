package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/agentplane/agentplane/httpapi"
)

// TestReloadNeedsAdmin: POST /v1/admin/reload reloads for a principal
// with the admin role and answers the digest in force; anyone else gets
// 403 forbidden.
func TestReloadNeedsAdmin(t *testing.T) {
	e := newEnv(t, &envOptions{keys: map[string]string{"alice-key-0123456789": "alice", "root-key-0123456789a": "root"},
		roles: map[string][]string{"root": {"admin"}}})
	var eb httpapi.ErrorBody
	if st := e.call("POST", "/v1/admin/reload", "alice-key-0123456789", nil, &eb); st != http.StatusForbidden || eb.Error.Code != "forbidden" {
		t.Fatalf("without the admin role: %d %+v", st, eb)
	}
	var got httpapi.Reloaded
	if st := e.call("POST", "/v1/admin/reload", "root-key-0123456789a", nil, &got); st != http.StatusOK || got.Config != e.core.Digest() || len(got.Config) != 64 {
		t.Fatalf("the admin's reload: %d %+v (in force %s)", st, got, e.core.Digest())
	}
}
