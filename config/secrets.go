package config

import (
	"fmt"
	"maps"
	"slices"
)

// SecretVar is an environment variable a configuration reads a secret
// from, with where the configuration asks for it.
type SecretVar struct {
	// Path is where the file names the variable, as problems name it:
	// auth.keys[1].key_env (user bob), tools[0].http.headers_env.Authorization.
	Path string
	Name string // the variable
	// LLM marks the LLM's key (llm.api_key_env), which only a program
	// that connects the LLM reads, and which AGENTPLANE_LLM_API_KEY
	// replaces.
	LLM bool
}

// SecretVars lists every environment variable the configuration reads a
// secret from — API keys (auth.keys[].key_env), the secret headers of HTTP
// tools, catalog providers and MCP servers (headers_env), the LLM's key
// (llm.api_key_env) — in the order of the file, headers by name.
func (c *Config) SecretVars() []SecretVar {
	var out []SecretVar
	headers := func(path string, env map[string]string) {
		for _, h := range slices.Sorted(maps.Keys(env)) {
			out = append(out, SecretVar{Path: path + ".headers_env." + h, Name: env[h]})
		}
	}
	for i, k := range c.Auth.Keys {
		if k.KeyEnv != "" {
			out = append(out, SecretVar{Path: fmt.Sprintf("auth.keys[%d].key_env (user %s)", i, k.UserID), Name: k.KeyEnv})
		}
	}
	for i, t := range c.Tools {
		if t.HTTP != nil {
			headers(fmt.Sprintf("tools[%d].http", i), t.HTTP.HeadersEnv)
		}
	}
	for i, cat := range c.Catalogs {
		if p := cat.Provider; p != nil && p.HTTP != nil {
			headers(fmt.Sprintf("catalogs[%d].provider.http", i), p.HTTP.HeadersEnv)
		}
	}
	for i, m := range c.MCPServers {
		headers(fmt.Sprintf("mcp_servers[%d]", i), m.HeadersEnv)
	}
	if c.LLM != nil && c.LLM.APIKeyEnv != "" {
		out = append(out, SecretVar{Path: "llm.api_key_env", Name: c.LLM.APIKeyEnv, LLM: true})
	}
	return out
}
