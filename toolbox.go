package agentplane

// Toolbox enables catalogs, providers, commands and tools, optionally gated by
// roles. A session's active toolboxes are its mode's toolboxes that the
// principal's roles allow.
type Toolbox struct {
	ID            string
	DisplayName   string
	Catalogs      []string // catalog ids this toolbox enables for resolution and pickers
	Providers     []string // provider ids this toolbox enables
	Commands      []string // command ids this toolbox exposes to the router
	Tools         []string // tool names offered to the LLM and MCP clients
	MCPServers    []string // MCP servers all of whose mounted tools are offered
	RequiredRoles []string // the principal needs every one of these roles
}

// Allows reports whether a principal with the given roles may use the
// toolbox: it holds every required role.
func (t *Toolbox) Allows(roles []string) bool {
	for _, need := range t.RequiredRoles {
		found := false
		for _, have := range roles {
			if have == need {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
