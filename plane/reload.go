package plane

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/llm"
)

// RestartError is a reload refused because the new configuration changes
// what only a restart changes: the identity provider, the LLM connection,
// or the server's API keys all removed (a server with no keys serves only
// loopback, decided when it started).
type RestartError struct {
	Config  string
	Changes []string
}

func (e *RestartError) Error() string {
	return fmt.Sprintf("%s: not reloaded, restart to change %s; nothing changed", e.Config, strings.Join(e.Changes, ", "))
}

// Reload reads the configuration again from where Open read it and puts it
// in force (core.Core.Reload): the new file is validated first — a file
// with problems is a config.Problems error (each with its file and line),
// one whose secrets are not all in the environment a *MissingEnvError,
// one that changes what needs a restart a *RestartError — and on any error
// nothing changed. Then the API keys are the new file's, and the secrets
// its headers read are masked too. Turns in flight finish on the
// configuration they started on. Reloads are serialized. It returns the
// digest of the configuration in force.
func (rt *Runtime) Reload(ctx context.Context) (string, error) {
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	o := rt.opts
	cfg, err := core.Load(o.Config, &o.Core)
	if err != nil {
		return "", err
	}
	if missing := MissingSecrets(cfg, rt.getenv, o.LLM); len(missing) > 0 {
		return "", &MissingEnvError{Config: o.Config.String(), Missing: missing}
	}
	keys, err := auth.New(cfg.Auth, rt.getenv)
	if err != nil {
		return "", fmt.Errorf("%s: %w", o.Config.String(), err)
	}
	old := rt.Core.Config()
	var changes []string
	if !reflect.DeepEqual(old.Auth.OIDC, cfg.Auth.OIDC) {
		changes = append(changes, "auth.oidc")
	}
	if o.LLM && !reflect.DeepEqual(old.LLM, cfg.LLM) {
		changes = append(changes, "llm")
	}
	if rt.Keys.Len() > 0 && keys.Len() == 0 {
		changes = append(changes, "auth.keys (all removed)")
	}
	if len(changes) > 0 {
		return "", &RestartError{Config: o.Config.String(), Changes: changes}
	}
	if o.LLM {
		if s, ok, err := llm.FromEnv(cfg.LLM, rt.getenv); err == nil && ok {
			rt.Core.Redactor().Add(s.APIKey) // a rotated key
		}
	}
	digest, err := rt.Core.Reload(ctx, cfg)
	if err != nil {
		return "", err
	}
	rt.Keys.Replace(keys)
	return digest, nil
}
