// Package demo holds the demo configuration embedded in the agentplane
// binary: a sales assistant with modes general, ddr and sales, email
// templates with their audience personas, mailer lists and design decision
// records.
package demo

import (
	_ "embed"

	"github.com/agentplane/agentplane/config"
)

// YAML is the demo configuration file.
//
//go:embed agentplane.yaml
var YAML []byte

// Name is the name problems in the demo configuration are reported under.
const Name = "demo/agentplane.yaml"

// Config parses the demo configuration. The demo's programs are added to
// opts.Programs.
func Config(opts *config.Options) (*config.Config, error) {
	o := config.Options{}
	if opts != nil {
		o = *opts
	}
	o.Programs = append(append([]string(nil), o.Programs...), Program)
	return config.Parse(YAML, Name, &o)
}
