package conversation_test

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/conversation"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store/memstore"
)

func ExampleEngine_Turn() {
	cfg, _ := demo.Config(nil)
	reg, _ := router.NewRegistry(cfg, nil)
	store := memstore.New()
	g, _ := gate.New(reg, store, nil)
	e := conversation.New(reg, g, store, nil)
	ctx := context.Background()

	sess, _ := e.Start(ctx, "")
	t, _ := e.Turn(ctx, sess.ID, agentplane.TurnInput{Text: "switch to ddr mode"})
	fmt.Println(t.Decision.Action, t.Result.Status, t.Session.Mode)
	t, _ = e.Turn(ctx, sess.ID, agentplane.TurnInput{Text: "open the agent control plane ddr"})
	fmt.Println(t.Result.Message)
	// Output:
	// invoke_command success ddr
	// Now working on ddr Agent Control Plane (AGN-000037).
}
