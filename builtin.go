package agentplane

import "slices"

// Names of the built-in tools: every configuration may put them in
// toolboxes and commands without declaring them. This is the one list of
// them; package tool implements them.
const (
	ToolListModes         = "agent_list_modes"          // read: the modes and what each is for
	ToolGetContext        = "agent_get_context"         // read: the session's mode and active work context
	ToolCatalogSearch     = "catalog_search"            // read: items of an active catalog, by text
	ToolNotifyUser        = "agent_notify_user"         // internal: a notification for the session's user (inbox or floor)
	ToolSetMode           = "agent_set_mode"            // effect: switch the session's mode
	ToolSetActiveEntity   = "agent_set_active_entity"   // effect: make an item the active work target
	ToolClearActiveEntity = "agent_clear_active_entity" // effect: close the active work target
)

// BuiltinTools lists the built-in tools' names.
var BuiltinTools = []string{ToolListModes, ToolGetContext, ToolCatalogSearch, ToolNotifyUser, ToolSetMode, ToolSetActiveEntity, ToolClearActiveEntity}

// IsEffectTool reports whether name is a built-in tool that changes the
// session: the gate applies it through the active command that declares
// it, never by calling code.
func IsEffectTool(name string) bool {
	return slices.Contains([]string{ToolSetMode, ToolSetActiveEntity, ToolClearActiveEntity}, name)
}
