package eval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/registry"
)

// The router's rule for similarity alone (an utterance near a command's
// examples without the shape of any of them): it decides only for a
// command with at least MinExamples hand-written examples, chosen among
// at least MinCommands commands active in the mode that have examples or
// triggers; a launcher's picker then opens, an executable command is only
// asked about (a confirmation question), never run. Anything else is
// recognised from examples only by an example's shape, or, for a
// launcher, by words all of which its examples and triggers use. These
// mirror router/examples.go (minExamples, minCommands); a test routes
// both sides of each bound, so the two cannot drift apart unnoticed.
const (
	MinExamples = 20
	MinCommands = 20
)

// SimilarityState is what similarity alone may do in a mode.
type SimilarityState string

// The states, strongest first.
const (
	SimilarityDecides SimilarityState = "decides"   // opens some launcher's picker
	SimilarityAsks    SimilarityState = "asks only" // only asks to confirm an executable command
	SimilarityOff     SimilarityState = "off"       // decides nothing
)

// CommandExamples is a command and how many examples it has.
type CommandExamples struct {
	ID       string
	Examples int
}

// ModeSimilarity is what similarity alone may do in one mode, and why.
type ModeSimilarity struct {
	Mode  string
	State SimilarityState
	// Commands counts the commands active in the mode (for the roles)
	// that have examples or triggers: what similarity chooses among.
	Commands int
	// Launchers and Executables are the active commands with MinExamples
	// or more examples, by id.
	Launchers, Executables []CommandExamples
	// Most is the active command with the most examples (zero when none
	// has any).
	Most CommandExamples
}

// Why says, with the counts, why the state is what it is.
func (m ModeSimilarity) Why() string {
	list := func(cs []CommandExamples) string {
		var s []string
		for _, c := range cs {
			s = append(s, fmt.Sprintf("%s (%d)", c.ID, c.Examples))
		}
		return strings.Join(s, ", ")
	}
	among := fmt.Sprintf("%d active commands with examples or triggers", m.Commands)
	switch m.State {
	case SimilarityDecides:
		s := fmt.Sprintf("%s (%d+ needed); launchers with %d+ examples open their pickers on similarity above the threshold: %s",
			among, MinCommands, MinExamples, list(m.Launchers))
		if len(m.Executables) > 0 {
			s += "; asked about, never run: " + list(m.Executables)
		}
		return s
	case SimilarityAsks:
		return fmt.Sprintf("%s (%d+ needed); no launcher has %d+ examples; asked about (a confirmation question), never run: %s",
			among, MinCommands, MinExamples, list(m.Executables))
	}
	off := "examples decide only by an example's shape, or a launcher on its own words"
	if m.Commands < MinCommands {
		return fmt.Sprintf("only %s (%d+ needed); %s", among, MinCommands, off)
	}
	most := "no command has examples"
	if m.Most.ID != "" {
		most = fmt.Sprintf("the most are %s's %d", m.Most.ID, m.Most.Examples)
	}
	return fmt.Sprintf("%s, but none has %d+ examples (%s); %s", among, MinExamples, most, off)
}

// Similarity says, for each mode of the configuration, what similarity
// alone may decide for a principal holding the roles.
func Similarity(reg *registry.Registry, roles []string) []ModeSimilarity {
	var out []ModeSimilarity
	for _, m := range reg.Config().Modes {
		ms := ModeSimilarity{Mode: m.Key, State: SimilarityOff}
		seen := map[string]bool{}
		for _, cmd := range reg.Commands() {
			if seen[cmd.ID] || !reg.CommandActive(m.Key, roles, cmd.ID) {
				continue
			}
			seen[cmd.ID] = true
			if len(cmd.Examples) == 0 && len(cmd.Triggers) == 0 {
				continue
			}
			ms.Commands++
			n := len(cmd.Examples)
			if n > ms.Most.Examples {
				ms.Most = CommandExamples{cmd.ID, n}
			}
			if n < MinExamples {
				continue
			}
			if cmd.Kind == agentplane.KindLauncher {
				ms.Launchers = append(ms.Launchers, CommandExamples{cmd.ID, n})
			} else {
				ms.Executables = append(ms.Executables, CommandExamples{cmd.ID, n})
			}
		}
		byID := func(a, b CommandExamples) int { return strings.Compare(a.ID, b.ID) }
		slices.SortFunc(ms.Launchers, byID)
		slices.SortFunc(ms.Executables, byID)
		switch {
		case ms.Commands < MinCommands:
		case len(ms.Launchers) > 0:
			ms.State = SimilarityDecides
		case len(ms.Executables) > 0:
			ms.State = SimilarityAsks
		}
		out = append(out, ms)
	}
	return out
}

// AllRoles returns every role the configuration's toolboxes require: a
// principal holding them all has every toolbox.
func AllRoles(reg *registry.Registry) []string {
	var out []string
	for _, tb := range reg.Config().Toolboxes {
		out = append(out, tb.RequiredRoles...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
