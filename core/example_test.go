package core_test

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
)

func ExampleCore_Turn() {
	ctx := context.Background()
	c, err := core.New(ctx, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Programs: demo.Programs(nil)}) // an in-memory store
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	sess, _ := c.Start(ctx, core.Start{Principal: "ann"})
	t, _ := c.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "switch to ddr mode"}})
	fmt.Println(t.Decision.Action, t.Result.Status, t.Session.Mode)
	t, _ = c.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "open the agent control plane ddr"}})
	fmt.Println(t.Result.Message)
	// Output:
	// invoke_command success ddr
	// Now working on design decision record Agent Control Plane (AGN-000037).
}
