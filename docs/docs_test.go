package docs_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/docs/schemas"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the documentation")

// pages are the documentation files: the README, docs/*.md and the
// examples' READMEs.
func pages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob("../examples/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]string{"../README.md"}, files...), examples...)
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is a heading's anchor as GitHub makes it.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ' || r == '-':
			b.WriteByte('-')
		case r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are a page's headings' anchors.
func anchors(t *testing.T, file string) map[string]bool {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(fence.ReplaceAll(raw, nil)), -1) {
		out[slug(m[1])] = true
	}
	return out
}

// TestLinks: every relative link in the README and the docs pages names
// a file of the repository, and an anchor, when it has one, a heading of
// that file.
func TestLinks(t *testing.T) {
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAll(raw, nil)
		for _, m := range link.FindAllSubmatch(text, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link to %s: no such file", page, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link to %s: no heading with that anchor in %s", page, target, path)
			}
		}
	}
}

// TestConfigurationReference: every field of the configuration file is in
// its reference, docs/configuration.md.
func TestConfigurationReference(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("../config/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if f, ok := n.(*ast.Field); ok && f.Tag != nil {
				tag, _ := strconv.Unquote(f.Tag.Value)
				if name, _, _ := strings.Cut(reflect.StructTag(tag).Get("yaml"), ","); name != "" && name != "-" {
					fields[name] = true
				}
			}
			return true
		})
	}
	if len(fields) < 50 {
		t.Fatalf("found only %d fields in package config", len(fields))
	}
	ref, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range fields {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).Match(ref) {
			t.Errorf("docs/configuration.md does not describe the field %q", name)
		}
	}
}

// The package map in docs/architecture.md is generated from go list: each
// package, the first sentence of its doc comment, and the agentplane
// packages it imports.
const (
	mapStart = "<!-- the package map: go test ./docs -run TestPackageMap -update writes it -->"
	mapEnd   = "<!-- end of the package map -->"
)

// TestPackageMap: the package map in docs/architecture.md is what go list
// says of the code (-update rewrites it).
func TestPackageMap(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Doc}}\t{{join .Imports \" \"}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/agentplane/agentplane"
	short := func(p string) string {
		if p == module {
			return "agentplane"
		}
		return strings.TrimPrefix(p, module+"/")
	}
	var b bytes.Buffer
	b.WriteString(mapStart + "\n\n| package | holds | imports (agentplane packages) |\n| --- | --- | --- |\n")
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, rest, _ := strings.Cut(sc.Text(), "\t")
		doc, imports, _ := strings.Cut(rest, "\t")
		if strings.HasPrefix(path, module+"/bench/") {
			continue // the benchmarks' own programs
		}
		var ours []string
		for _, imp := range strings.Fields(imports) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				ours = append(ours, short(imp))
			}
		}
		slices.Sort(ours)
		deps := strings.Join(ours, "`, `")
		if deps != "" {
			deps = "`" + deps + "`"
		}
		if deps == "" {
			deps = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", short(path), strings.ReplaceAll(doc, "|", `\|`), deps)
	}
	b.WriteString("\n" + mapEnd)
	page, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	start, end := bytes.Index(page, []byte(mapStart)), bytes.Index(page, []byte(mapEnd))
	if start < 0 || end < start {
		t.Fatalf("docs/architecture.md has no package map between %q and %q", mapStart, mapEnd)
	}
	want := slices.Concat(page[:start], b.Bytes(), page[end+len(mapEnd):])
	if *update {
		if err := os.WriteFile("architecture.md", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(page, want) {
		t.Fatal("the package map in docs/architecture.md is not what go list says: go test ./docs -run TestPackageMap -update")
	}
}

// TestInvocationContextExample: the invocation context docs/gate.md shows
// is one its schema accepts.
func TestInvocationContextExample(t *testing.T) {
	raw, err := os.ReadFile("gate.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)### What a tool is told.*?```json\n(.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/gate.md shows no invocation context")
	}
	var v any
	if err := json.Unmarshal(m[1], &v); err != nil {
		t.Fatalf("the example is not JSON: %v", err)
	}
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Validate(schemas.InvocationContext, v); err != nil {
		t.Fatal(err)
	}
}

// TestImportRules: the import rules docs/architecture.md states hold —
// the store drivers depend on the domain and the store contract only,
// the tool contract and the MCP client on no part that runs a session,
// the SQL drivers are linked by the command and not by the runtime —
// counted over every package each depends on, not only its imports.
func TestImportRules(t *testing.T) {
	const module = "github.com/agentplane/agentplane/"
	session := []string{"gate", "router", "registry", "core", "plane", "httpapi", "mcpserver", "llm", "notify", "workflow", "events"}
	for _, rule := range []struct {
		pkg       string
		forbidden []string
	}{
		{"store/sqlite", session},
		{"store/postgres", session},
		{"store/memstore", session},
		{"store", session},
		{"audit", append(slices.Clone(session), "store", "config", "tool")},
		{"tool", append(slices.Clone(session), "store")},
		{"mcpclient", append(slices.Clone(session), "store")},
		{"resolve", append(slices.Clone(session), "store", "tool")},
		{"router", []string{"gate", "core", "plane", "store", "httpapi", "mcpserver", "llm", "notify", "workflow"}},
	} {
		t.Run(rule.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../"+rule.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", rule.pkg, err)
			}
			deps := strings.Fields(string(out))
			for _, f := range rule.forbidden {
				if slices.Contains(deps, module+f) {
					t.Errorf("%s depends on %s (go list -deps ./%s)", rule.pkg, f, rule.pkg)
				}
			}
		})
	}
	// Whoever opens the store closes it: the SQL drivers are linked by the
	// command (through plane/drivers), never by the runtime or the parts
	// an embedder links, which are given a store or an opener.
	drivers := []string{"modernc.org/sqlite", "github.com/jackc/pgx/v5", module + "store/sqlite", module + "store/postgres"}
	for _, pkg := range []string{"plane", "core", "httpapi", "mcpserver", "workflow", "notify", "llm", "events"} {
		t.Run("drivers/"+pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../"+pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", pkg, err)
			}
			deps := strings.Fields(string(out))
			for _, d := range drivers {
				if slices.Contains(deps, d) {
					t.Errorf("%s links the driver %s (go list -deps ./%s | grep %s): pass plane.Options.Store or OpenStore instead", pkg, d, pkg, d)
				}
			}
		})
	}
	t.Run("drivers/cmd/agentplane", func(t *testing.T) {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../cmd/agentplane").Output()
		if err != nil {
			t.Fatalf("go list -deps ./cmd/agentplane: %v", err)
		}
		deps := strings.Fields(string(out))
		for _, d := range drivers {
			if !slices.Contains(deps, d) {
				t.Errorf("the command does not link %s: it opens the stores (plane/drivers)", d)
			}
		}
	})
	// The harnesses under internal/testkit serve tests and benchmarks only:
	// no package the binary or an embedder links depends on one, so the
	// structure drawn from the imports runs one way.
	t.Run("testkit", func(t *testing.T) {
		list, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...").Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
			f := strings.Fields(line)
			pkg := strings.TrimPrefix(f[0], module)
			if strings.HasPrefix(pkg, "internal/testkit") || strings.HasPrefix(pkg, "bench/") {
				continue
			}
			for _, imp := range f[1:] {
				if strings.HasPrefix(imp, module+"internal/testkit") {
					t.Errorf("%s imports %s: the harnesses under internal/testkit are for tests and benchmarks only", pkg, strings.TrimPrefix(imp, module))
				}
			}
		}
	})
}
