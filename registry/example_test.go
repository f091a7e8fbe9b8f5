package registry_test

import (
	"fmt"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/registry"
)

func ExampleRegistry_CommandActive() {
	cfg, _ := demo.Config(nil)
	reg, _ := registry.New(cfg, nil)
	for _, mode := range []string{"general", "sales"} {
		fmt.Println(mode, reg.CommandActive(mode, nil, "send_template_to_list"))
	}
	cmd, _ := reg.Command("send_template_to_list")
	fmt.Printf("%q\n", registry.Preconditions(cmd, "sales", agentplane.ActiveWorkContext{}))
	// Output:
	// general false
	// sales true
	// "needs an active email_template; open one first"
}
