// Package consttest reads the string constants a Go source file declares,
// for tests that hold a hand-written list (a set of states quoted for
// SQL) to every constant of a kind: one added later is checked too.
package consttest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// Const is a string constant: its name and its value.
type Const struct{ Name, Value string }

// Strings returns, in the order declared, the string constants of the Go
// source file at path whose names start with prefix; it fails t when
// fewer than least are found (the file moved, or the constants were
// renamed: the test would check nothing).
func Strings(t testing.TB, path, prefix string, least int) []Const {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Const
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, prefix) {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, vs.Names[0].Name, err)
		}
		out = append(out, Const{vs.Names[0].Name, v})
		return true
	})
	if len(out) < least {
		t.Fatalf("%s: %d string constants named %s*, want at least %d", path, len(out), prefix, least)
	}
	return out
}
