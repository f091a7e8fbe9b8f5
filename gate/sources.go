package gate

import (
	"maps"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/resolve"
)

// read notes that the checks read ix, the index of src: a provider's
// answer (its version) is named in the record (see name), whatever the
// invocation's front end — a turn, an API intent, an MCP or LLM call, a
// workflow task — so replay serves the same items. A static catalog's
// index has no version and is not noted. The first answer read of a
// source is the one named.
func (x *execution) read(src agentplane.ResolverSource, ix *resolve.Index) {
	v := ix.Version()
	if v == "" {
		return
	}
	k := src.String()
	if _, ok := x.sources[k]; ok {
		return
	}
	if x.sources == nil {
		x.sources = make(map[string]string, 1)
	}
	x.sources[k] = v
}

// name puts the provider answers the checks read into the record r: a
// turn's into its decision's sources, beside what the router read (a
// source the router named keeps the router's answer: replay serves one
// answer of a source per record); any other record's into its own
// sources. A record whose checks read no provider is left as it is.
func (x *execution) name(r *audit.Record) {
	if len(x.sources) == 0 {
		return
	}
	if r.Decision == nil {
		r.Sources = maps.Clone(x.sources)
		return
	}
	var merged map[string]string
	for k, v := range x.sources {
		if _, ok := r.Decision.Sources[k]; ok {
			continue
		}
		if merged == nil {
			merged = make(map[string]string, len(r.Decision.Sources)+len(x.sources))
			maps.Copy(merged, r.Decision.Sources) // the caller's decision keeps its own map
		}
		merged[k] = v
	}
	if merged != nil {
		r.Decision.Sources = merged
	}
}
