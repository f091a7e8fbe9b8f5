// Package deploytest holds the tests of agentplane as deploy/ ships it:
// instances on one PostgreSQL behind HAProxy and nginx with the shipped
// configurations, killed, restarted and reloaded while clients take turns,
// confirm, emit notifications, run workflows and follow streams; the
// systemd unit and the compose file; several instances sharing streams,
// watchdogs and reloads. It has no code of its own; the tests run the
// binary (internal/testkit/servetest).
package deploytest
