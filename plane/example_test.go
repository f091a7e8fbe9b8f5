package plane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
)

// Open the runtime on the demo configuration and a SQLite file, take a
// turn, and see what the runtime holds.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "plane-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, err := plane.Open(ctx, plane.Options{
		Config:    core.Source{YAML: demo.YAML, Name: demo.Name},
		DB:        filepath.Join(dir, "agentplane.db"),
		OpenStore: drivers.Open, // links the SQL drivers: package plane does not
		Core:      core.Options{Programs: demo.Programs(nil)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(time.Minute)
	s, _ := rt.Core.Start(ctx, core.Start{Principal: "ann"})
	t, _ := rt.Core.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "switch to ddr mode"}})
	fmt.Println(t.Session.Mode)
	fmt.Println(rt.Bus != nil, rt.Workflows != nil, rt.Agent != nil)
	// Output:
	// ddr
	// true true false
}
