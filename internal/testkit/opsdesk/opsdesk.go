// Package opsdesk writes the configuration of an IT operations desk for
// the router's tests: three modes, one of them with more than twenty
// launchers of twenty-odd examples each (so similarity decides for them),
// executables with triggers and examples, catalogs with look-alike names
// and people in several scripts. The tests use it as a configuration of a
// domain the demo does not cover.
package opsdesk

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Modes of the configuration: general has the desk's basics, ops every
// toolbox, triage the launchers of incidents work (fewer than twenty, so
// similarity alone decides nothing there).
const (
	General = "general"
	Ops     = "ops"
	Triage  = "triage"
)

// kinds are the things the desk lists: catalog id, display name, entity
// type, its nouns (plural first), and its items.
var kinds = []struct {
	id, name, entity string
	nouns            []string
	items            []string
	triage           bool
}{
	{"services", "Services", "service", []string{"services", "microservices"},
		[]string{"Payments API", "Payments Worker", "Checkout Web", "Search Indexer", "Auth Gateway", "Billing Worker", "Notification Relay", "Inventory Sync", "Payments API Gateway"}, true},
	{"incidents", "Incidents", "incident", []string{"incidents", "outages"},
		[]string{"INC-4411 checkout latency", "INC-4412 login failures", "INC-4415 disk full on db-3"}, true},
	{"alerts", "Alerts", "alert", []string{"alerts", "alarms"},
		[]string{"High error rate", "Disk usage above 90%", "Certificate expiring", "Queue backlog"}, true},
	{"deployments", "Deployments", "deployment", []string{"deployments", "deploys"},
		[]string{"payments-api v2.14", "checkout-web v7.2", "auth-gateway v1.9"}, true},
	{"runbooks", "Runbooks", "runbook", []string{"runbooks", "playbooks"},
		[]string{"Database failover", "Cache flush", "Rotate credentials"}, true},
	{"dashboards", "Dashboards", "dashboard", []string{"dashboards", "boards"},
		[]string{"Golden signals", "Checkout funnel", "Infra overview"}, true},
	{"hosts", "Hosts", "host", []string{"hosts", "machines"},
		[]string{"db-3", "db-4", "web-11", "web-12"}, true},
	{"clusters", "Clusters", "cluster", []string{"clusters", "kubernetes clusters"},
		[]string{"prod-eu", "prod-us", "staging"}, false},
	{"oncall", "On-call people", "person", []string{"on call people", "responders"},
		[]string{"José Álvarez", "Zoë Brandt", "Ярослав Петров", "李伟", "Minh An", "Sam O'Neill"}, true},
	{"tickets", "Tickets", "ticket", []string{"tickets", "issues"},
		[]string{"OPS-101 renew wildcard cert", "OPS-102 upgrade postgres", "OPS-103 clean old snapshots"}, true},
	{"changes", "Change requests", "change", []string{"change requests", "changes"},
		[]string{"CHG-77 firewall rule", "CHG-78 dns cutover"}, false},
	{"releases", "Releases", "release", []string{"releases", "release notes"},
		[]string{"2026.11", "2026.12"}, false},
	{"certificates", "Certificates", "certificate", []string{"certificates", "certs"},
		[]string{"wildcard.example.com", "api.example.com"}, false},
	{"secrets", "Secrets", "secret", []string{"secrets", "credentials"},
		[]string{"stripe key", "smtp password"}, false},
	{"backups", "Backups", "backup", []string{"backups", "snapshots"},
		[]string{"nightly db-3", "weekly full"}, false},
	{"databases", "Databases", "database", []string{"databases", "dbs"},
		[]string{"orders db", "users db", "analytics warehouse"}, false},
	{"queues", "Queues", "queue", []string{"queues", "message queues"},
		[]string{"email outbound", "webhook retries"}, false},
	{"jobs", "Scheduled jobs", "job", []string{"scheduled jobs", "cron jobs"},
		[]string{"nightly export", "hourly cleanup"}, false},
	{"logs", "Log streams", "log_stream", []string{"logs", "log streams"},
		[]string{"edge access log", "app error log"}, false},
	{"metrics", "Metrics", "metric", []string{"metrics", "graphs"},
		[]string{"p99 latency", "error budget"}, false},
	{"teams", "Teams", "team", []string{"teams", "squads"},
		[]string{"Platform", "Payments", "Growth"}, false},
	{"slos", "Service level objectives", "slo", []string{"slos", "service level objectives"},
		[]string{"checkout availability", "search latency"}, false},
}

// launcherForms are the request forms of the launchers' examples; %s is
// one of the kind's nouns.
var launcherForms = []string{
	"show me the %s", "list all %s", "open the %s list", "let me see the %s", "bring up the %s",
	"pull up %s", "display the %s", "browse %s", "what %s do we have", "which %s are there",
	"give me the list of %s", "go to %s", "take me to the %s", "%s please", "all the %s",
	"view %s", "i want to see the %s", "can you show the %s", "open %s", "find the %s",
	"see all %s", "list %s", "get me the %s overview",
}

// executables are the commands that act: id, catalog, tool, whether they
// confirm first, their triggers and examples (%s: an item's name).
var executables = []struct {
	id, catalog, tool string
	confirm           bool
	triggers          []string
	examples          []string
}{
	{"restart_service", "services", "restart_service", true,
		[]string{"(restart|bounce) [the] {item} [service]", "give [the] {item} [service] a restart"},
		[]string{"restart %s", "restart the %s service", "bounce %s", "please restart %s", "restart %s now",
			"can you restart %s", "restart the %s", "bounce the %s service", "i need %s restarted",
			"%s needs a restart", "kick %s", "reboot the %s service", "restart %s please", "cycle %s",
			"do a restart of %s", "restart service %s", "could you bounce %s", "recycle %s",
			"restart %s for me", "give %s a restart", "bounce %s please"}},
	{"ack_incident", "incidents", "ack_incident", false,
		[]string{"(ack|acknowledge) [the] {item} [incident]"},
		[]string{"ack %s", "acknowledge %s", "acknowledge the %s incident", "ack the %s incident"}},
	{"page_person", "oncall", "page_person", true,
		[]string{"page {item}", "wake up {item}"},
		[]string{"page %s", "page %s now", "wake %s up"}},
	{"rollback_deployment", "deployments", "rollback_deployment", true,
		[]string{"(roll back|rollback|revert) [the] {item} [deployment]"},
		[]string{"roll back %s", "revert %s", "rollback the %s deploy"}},
}

// Config returns the configuration as YAML a user could have written. Its
// tools run on programs named as the tools are (restart_service,
// ack_incident, page_person, rollback_deployment), which core.Options.Programs
// supplies.
func Config() ([]byte, error) {
	type m = map[string]any
	var catalogs, cmds, tools, toolboxes []any
	var triageBoxes, opsBoxes []string
	for _, k := range kinds {
		var items []any
		for i, it := range k.items {
			items = append(items, m{"id": fmt.Sprintf("%s-%d", strings.ToUpper(k.entity[:3]), i+1), "display_name": it})
		}
		catalogs = append(catalogs, m{"id": k.id, "display_name": k.name, "entity_type": k.entity, "items": items})
		var ex []string
		for i, f := range launcherForms {
			ex = append(ex, fmt.Sprintf(f, k.nouns[i%len(k.nouns)]))
		}
		set := "work_on_" + k.entity
		triggers := []string{"(open|work on) [the] {item} " + strings.ReplaceAll(k.entity, "_", " ")}
		if k.id == "dashboards" { // a trigger whose words other requests share
			triggers = append(triggers, "pull up [the] {item} [dashboard]")
		}
		cmds = append(cmds,
			m{"id": "open_" + k.id, "display_name": "Browse " + strings.ToLower(k.name), "kind": "launcher",
				"target_catalog": k.id, "on_select": set, "examples": ex},
			m{"id": set, "display_name": "Work on a " + strings.ReplaceAll(k.entity, "_", " "), "tool": "agent_set_active_entity",
				"parameter": k.entity + "_id", "resolver": m{"catalog": k.id}, "sets_active_context": true,
				"active_entity_type": k.entity, "triggers": triggers})
		box := m{"id": k.id, "display_name": k.name, "catalogs": []string{k.id},
			"commands": []string{"open_" + k.id, set}, "tools": []string{"catalog_search", "agent_set_active_entity"}}
		for _, e := range executables {
			if e.catalog == k.id {
				box["commands"] = append(box["commands"].([]string), e.id)
				box["tools"] = append(box["tools"].([]string), e.tool)
			}
		}
		toolboxes = append(toolboxes, box)
		opsBoxes = append(opsBoxes, k.id)
		if k.triage {
			triageBoxes = append(triageBoxes, k.id)
		}
	}
	for _, e := range executables {
		var items []string
		for _, k := range kinds {
			if k.id == e.catalog {
				items = k.items
			}
		}
		var ex []string
		for i, f := range e.examples {
			ex = append(ex, fmt.Sprintf(f, strings.ToLower(items[i%len(items)])))
		}
		c := m{"id": e.id, "display_name": strings.ReplaceAll(e.id, "_", " "), "tool": e.tool, "parameter": "id",
			"resolver": m{"catalog": e.catalog}, "triggers": e.triggers, "examples": ex, "produces_side_effects": true}
		if e.confirm {
			c["requires_confirmation"] = true
		}
		cmds = append(cmds, c)
		tools = append(tools, m{"name": e.tool, "description": strings.ReplaceAll(e.id, "_", " ") + " (a test tool).",
			"impact": "external", "program": e.tool, "input_schema": m{"type": "object", "properties": m{"id": m{"type": "string"}},
				"required": []string{"id"}, "additionalProperties": false}})
	}
	return yaml.Marshal(m{
		"version": 1,
		"modes": []any{
			m{"key": General, "display_name": "General", "default": true, "toolboxes": []string{"core", "services", "incidents"}},
			m{"key": Ops, "display_name": "Operations", "toolboxes": append([]string{"core"}, opsBoxes...)},
			m{"key": Triage, "display_name": "Triage", "toolboxes": append([]string{"core"}, triageBoxes...)},
		},
		"toolboxes": append([]any{m{"id": "core", "display_name": "Core", "catalogs": []string{"modes"},
			"commands": []string{"set_mode"}, "tools": []string{"agent_set_mode", "agent_get_context"}}}, toolboxes...),
		"catalogs": catalogs,
		"commands": append([]any{m{"id": "set_mode", "display_name": "Switch mode", "tool": "agent_set_mode",
			"parameter": "mode", "resolver": m{"catalog": "modes"}, "sets_session_mode": true,
			"triggers": []string{"(switch|change|go) to [the] {item} mode"}}}, cmds...),
		"tools": tools,
	})
}

// Programs returns the names of the programs the configuration's tools run
// on.
func Programs() []string {
	var out []string
	for _, e := range executables {
		out = append(out, e.tool)
	}
	return out
}
