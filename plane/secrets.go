package plane

import (
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/config"
)

// MissingSecrets returns the secret variables of the configuration that
// the environment does not set (or sets empty), each as a line naming the
// variable and where the configuration asks for it. The LLM's key counts
// only when llm is set (the program connects the LLM) and
// AGENTPLANE_LLM_API_KEY, which replaces it, is not set either.
func MissingSecrets(cfg *config.Config, getenv func(string) string, llm bool) []string {
	var out []string
	for _, v := range cfg.SecretVars() {
		if getenv(v.Name) != "" {
			continue
		}
		switch {
		case v.LLM && (!llm || getenv("AGENTPLANE_LLM_API_KEY") != ""):
		case v.LLM:
			out = append(out, fmt.Sprintf("%s: environment variable %s is not set (or set AGENTPLANE_LLM_API_KEY)", v.Path, v.Name))
		default:
			out = append(out, fmt.Sprintf("%s: environment variable %s is not set", v.Path, v.Name))
		}
	}
	return out
}

// MissingEnvError is the error of a configuration whose secrets are not
// all in the environment: every variable that is not set, at once.
type MissingEnvError struct {
	Config  string   // the configuration's name
	Missing []string // MissingSecrets's lines
}

func (e *MissingEnvError) Error() string {
	return fmt.Sprintf("%s: %d environment variable(s) the configuration reads secrets from are not set:\n  %s",
		e.Config, len(e.Missing), strings.Join(e.Missing, "\n  "))
}
