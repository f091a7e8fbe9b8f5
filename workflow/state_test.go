package workflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/workflow"
)

// TestLiveStatuses: the claimable workflows' query names every status a
// workflow can still leave — each Status constant of the package, read
// from its source so that a status added later is checked too — and no
// terminal one. A live status missing from it would leave a workflow
// whose runner died in that status with no one to take it over.
func TestLiveStatuses(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "state.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	named := strings.Split(workflow.LiveStatuses, ", ")
	seen, live := 0, 0
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Status") {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		status, _ := strconv.Unquote(lit.Value)
		seen++
		listed := strings.Contains(", "+workflow.LiveStatuses+", ", ", '"+status+"', ")
		if workflow.Terminal(status) == listed {
			t.Errorf("%s (%q): terminal %v, named by the claimable query %v", vs.Names[0].Name, status, workflow.Terminal(status), listed)
		}
		if !workflow.Terminal(status) {
			live++
		}
		return true
	})
	if seen < 7 || len(named) != live {
		t.Fatalf("%d Status constants read, %d live, %d named (%s)", seen, live, len(named), workflow.LiveStatuses)
	}
}
