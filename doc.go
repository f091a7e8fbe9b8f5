// Package agentplane holds the domain types of the agentplane control plane:
// modes, toolboxes, resolver catalogs, commands, the active work context,
// sessions and the router's decisions.
//
// agentplane is the deterministic layer between a person, an LLM and the tools
// that act on the world. The router (package router) answers every user turn
// with exactly one Decision; the gate (package gate) is the one door through
// which every action passes. This package holds only the types those parts
// share, so that every other package can depend on it and on nothing bigger.
//
//	c, err := core.New(ctx, core.Source{Path: "agentplane.yaml"}, &core.Options{Store: st})
//	dec, err := c.Route(ctx, sess, agentplane.TurnInput{Text: "switch to ddr mode"})
//	// dec.Action == agentplane.ActionInvokeCommand, dec.CommandID == "set_mode", dec.ResolvedID == "ddr"
package agentplane
