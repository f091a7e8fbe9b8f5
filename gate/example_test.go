package gate_test

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/store/memstore"
)

func ExampleGate_Execute() {
	ctx := context.Background()
	cfg, _ := demo.Config(nil)
	reg, _ := registry.New(cfg, nil)
	g, _ := gate.New(reg, memstore.New(), nil)
	s, _ := g.Open(ctx, gate.Opening{SessionID: "s1", Principal: "ann"})
	inv := gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginUser, Principal: "ann", RequestID: "r1"}
	res, _ := g.Execute(ctx, inv)
	fmt.Println(res.Status, res.Session.Mode, res.Session.Version)
	res, _ = g.Execute(ctx, inv) // a retry: the recorded result, nothing runs again
	fmt.Println(res.Status, res.Session.Version)
	inv.ResolvedID = "sales" // the same request id for another invocation
	res, _ = g.Execute(ctx, inv)
	fmt.Println(res.Status, res.Error.Code)
	// Output:
	// success ddr 2
	// success 2
	// rejected request_conflict
}
