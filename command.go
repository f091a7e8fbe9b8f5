package agentplane

// CommandKind says whether a command runs once its id is known or leads to a
// selection step.
type CommandKind string

// Command kinds.
const (
	// KindExecutable runs its tool as soon as its one parameter is resolved.
	KindExecutable CommandKind = "executable"
	// KindLauncher opens a picker on its target catalog; the selection then
	// invokes its OnSelect command.
	KindLauncher CommandKind = "launcher"
)

// CommandDefinition is a routable binding with exactly one parameter: a
// resolved canonical id.
type CommandDefinition struct {
	ID          string
	DisplayName string
	Description string
	Kind        CommandKind

	Tool       string         // the tool that runs (executable commands)
	Parameter  string         // the name of the single parameter
	Source     ResolverSource // where the parameter's ids come from
	PickerType string         // UI hint, "list" by default

	TargetCatalog string // launcher: the catalog whose picker opens
	TargetMode    string // launcher: the mode that should be active (informational)
	OnSelect      string // launcher: the command a selection invokes

	SetsSessionMode     bool   // the resolved id becomes the session mode
	SetsActiveContext   bool   // the resolved item becomes the AWC entity
	ActiveEntityType    string // the AWC entity type; required with SetsActiveContext
	ActiveEntityName    string // how ActiveEntityType is shown to people ("email template")
	ClearsActiveContext bool   // the command clears the AWC
	Domain              string // AWC domain set with the entity, optional

	RequiresConfirmation bool
	ProducesSideEffects  bool
	// ConfirmationText is the confirmation question; "{item}" stands for
	// the resolved item's display name. Empty means "Confirm <display name>: '{item}'?".
	ConfirmationText string

	// Preconditions must hold for the gate to run the command.
	Preconditions Preconditions

	Aliases  []string // slash-form names besides the id
	Triggers []string // trigger patterns (see package trigger)
	Examples []string // whole example utterances
}

// NeedsConfirmation reports whether the human must confirm before the
// command runs: it requires confirmation or produces side effects.
func (c *CommandDefinition) NeedsConfirmation() bool {
	return c.RequiresConfirmation || c.ProducesSideEffects
}

// SelectionSource returns the resolver source a selection of this command is checked
// against: the target catalog for launchers, else the command's source.
func (c *CommandDefinition) SelectionSource() ResolverSource {
	if c.Kind == KindLauncher {
		return ResolverSource{CatalogID: c.TargetCatalog}
	}
	return c.Source
}

// Preconditions are declared conditions on the session for a command to run.
type Preconditions struct {
	Modes          []string // the session is in one of these modes (empty: any)
	RequiresActive []string // the AWC's active entity is of one of these types (empty: none needed)
}
