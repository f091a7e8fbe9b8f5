package core_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// closeCounting is a store that counts its Close calls.
type closeCounting struct {
	store.Store
	closes atomic.Int32
}

func (c *closeCounting) Close() error {
	c.closes.Add(1)
	return c.Store.Close()
}

// TestNewFailedLeavesTheStore: a core that fails to build does not close
// the store it was given (its caller does, once: plane.Open closed it a
// second time); a core that was built closes it once, however often it is
// closed.
func TestNewFailedLeavesTheStore(t *testing.T) {
	st := &closeCounting{Store: memstore.New()}
	// a program tool named as a built-in one: mounting the tools fails
	_, err := core.New(context.Background(), core.Source{YAML: demo.YAML, Name: demo.Name},
		&core.Options{Store: st, Programs: demo.Programs(nil), Tools: []tool.Tool{tool.GetContext()}})
	if err == nil {
		t.Fatal("a tool registered twice: want an error")
	}
	if n := st.closes.Load(); n != 0 {
		t.Fatalf("a failed New closed the caller's store %d times", n)
	}
	c, err := core.New(context.Background(), core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Store: st, Programs: demo.Programs(nil)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	if n := st.closes.Load(); n != 1 {
		t.Fatalf("the core closed its store %d times, want 1", n)
	}
}
