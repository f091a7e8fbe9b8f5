package workflow_test

import (
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/consttest"
	"github.com/agentplane/agentplane/workflow"
)

// TestLiveStatuses: the claimable workflows' query names every status a
// workflow can still leave — each Status constant of the package, read
// from its source so that a status added later is checked too — and no
// terminal one. A live status missing from it would leave a workflow
// whose runner died in that status with no one to take it over.
func TestLiveStatuses(t *testing.T) {
	named := strings.Split(workflow.LiveStatuses, ", ")
	live := 0
	for _, c := range consttest.Strings(t, "state.go", "Status", 7) {
		listed := strings.Contains(", "+workflow.LiveStatuses+", ", ", '"+c.Value+"', ")
		if workflow.Terminal(c.Value) == listed {
			t.Errorf("%s (%q): terminal %v, named by the claimable query %v", c.Name, c.Value, workflow.Terminal(c.Value), listed)
		}
		if !workflow.Terminal(c.Value) {
			live++
		}
	}
	if len(named) != live {
		t.Fatalf("%d live statuses, %d named (%s)", live, len(named), workflow.LiveStatuses)
	}
}
