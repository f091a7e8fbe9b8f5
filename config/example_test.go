package config_test

import (
	"fmt"

	"github.com/agentplane/agentplane/config"
)

func ExampleParse() {
	_, err := config.Parse([]byte(`version: 1
modes:
  - {key: general, default: true, toolboxes: [core]}
toolboxes:
  - {id: core, catalogs: [modes], commands: [set_mode]}
commands:
  - id: set_mode
    tool: agent_set_mode
    parameter: mode
    resolver: {catalog: moods}
    triggers: ["switch to {item} mode", "switch (to mode"]
`), "agentplane.yaml", nil)
	fmt.Println(err)
	// Output:
	// agentplane.yaml:10: commands[0].resolver.catalog: unknown catalog "moods"
	// agentplane.yaml:11: commands[0].triggers[1]: trigger "switch (to mode", column 8: unclosed '('
}
