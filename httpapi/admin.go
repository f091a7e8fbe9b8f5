package httpapi

import (
	"net/http"
	"slices"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/config"
)

// RoleAdmin is the role a principal needs for the /v1/admin routes. The
// local principal of a server without keys (loopback only) has it.
const RoleAdmin = "admin"

// admin returns a forbidden error unless p may administer the server:
// p holds the admin role, or p is the local principal of a server with no
// keys.
func (s *Server) admin(p auth.Principal) error {
	if slices.Contains(p.Roles, RoleAdmin) || p.ID == auth.Local.ID && s.keys.Len() == 0 && s.auth.OIDC == nil {
		return nil
	}
	return agentplane.Errorf(agentplane.CodeForbidden, "%s needs the role %q", "reloading the configuration", RoleAdmin)
}

// Reloaded is the answer to a reload: the configuration now in force.
type Reloaded struct {
	Config string `json:"config"` // its digest (config.Digest), as audit records name it
}

func (s *Server) postReload(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.admin(p); err != nil {
		return err
	}
	if s.reload == nil {
		return agentplane.Errorf(agentplane.CodeNotFound, "this server has no configuration to reload")
	}
	before := s.core.Digest()
	digest, err := s.reload(r.Context())
	if err != nil {
		s.log.Warn("configuration not reloaded", "principal", p.ID, "err", err)
		return agentplane.Errorf(agentplane.CodeInvalidConfig, "not reloaded, nothing changed: %v", err)
	}
	s.log.Info("configuration reloaded", "principal", p.ID, "digest", config.ShortDigest(digest), "was", config.ShortDigest(before))
	writeJSON(w, http.StatusOK, Reloaded{Config: digest})
	return nil
}
