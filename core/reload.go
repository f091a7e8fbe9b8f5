package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/config"
)

// Reload puts cfg, a configuration already valid (Load), in force in
// place of the one in force, whole: the registry, the router, the gate,
// the tools, the MCP servers (those with unchanged settings are kept with
// their connections, new ones mounted, removed ones closed once nothing
// that started on the old configuration still runs). The configuration is
// kept in the store by digest first. Turns, executions and intents that
// started before run to their end on the old configuration; those that
// start after run on cfg. A session whose mode, or whose pending picker's
// or confirmation's command, cfg no longer has is fitted to it at its next
// turn as a resume fits it, with a note for the person (see Resume).
//
// On error nothing changed. Reloads are serialized. It returns the digest
// of the configuration in force.
func (c *Core) Reload(ctx context.Context, cfg *config.Config) (string, error) {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	if c.derived {
		return "", errors.New("core: a derived core is not reloaded (reload the core it was derived from)")
	}
	if c.ctx.Err() != nil {
		return "", errors.New("core: closed")
	}
	old := c.cur()
	s, err := c.build(ctx, cfg, old)
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.name, err)
	}
	c.snap.Store(s)
	for _, m := range s.mcp {
		// a kept server that came up while s was built had its tools
		// mounted in old
		if old.has(m) && m.srv.Health().Up {
			c.register(s.tools, m.spec.Name, m.srv.Tools())
		}
	}
	old.retire()
	var gone []*mounted
	for _, m := range old.mcp {
		if !s.has(m) {
			m.retry()
			gone = append(gone, m)
		}
	}
	if len(gone) > 0 {
		c.bg.Go(func() {
			select { // what runs on the old configuration may still call them
			case <-old.drained:
			case <-c.ctx.Done():
			}
			for _, m := range gone {
				m.srv.Close()
			}
		})
	}
	if old.digest != s.digest {
		c.log.Info("configuration reloaded", "config", c.name, "digest", config.ShortDigest(s.digest), "was", config.ShortDigest(old.digest))
	}
	if c.obs.ToolsChanged != nil {
		c.obs.ToolsChanged() // the active tool sets may differ
	}
	return s.digest, nil
}
