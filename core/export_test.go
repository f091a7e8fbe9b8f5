package core

import (
	"context"

	"github.com/agentplane/agentplane/store"
)

// What the core's own tests reach that nothing else may.

// StoreOf returns the core's store: tests write to it behind the gate's
// back to check the gate notices.
func StoreOf(c *Core) store.Store { return c.store }

// RecoverOnce takes over, once, the requests left running by a stopped
// instance (the step Recover repeats).
func RecoverOnce(ctx context.Context, c *Core) (int, error) { return c.cur().gate.Recover(ctx) }
