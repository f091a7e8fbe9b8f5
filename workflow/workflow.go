// Package workflow is agentplane's workflows (ADR-018): a DAG of tool
// calls, run layer by layer through the gate. This file is the
// definition: tasks {id, tool, args, depends_on}, whose args may refer to
// a dependency's output (${task_id.output.path}), and its validation,
// which reports every problem with its line.
package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentplane/agentplane/internal/canonjson"
)

// Definition is a workflow: its tasks, and whether it stops for a
// decision after each layer.
type Definition struct {
	Name               string `yaml:"name" json:"name"`
	PerLayerValidation bool   `yaml:"per_layer_validation" json:"per_layer_validation,omitempty"`
	Tasks              []Task `yaml:"tasks" json:"tasks"`
}

// Task is one tool call of a workflow.
type Task struct {
	ID        string         `yaml:"id" json:"id"`
	Tool      string         `yaml:"tool" json:"tool"`
	Args      map[string]any `yaml:"args" json:"args,omitempty"`
	DependsOn []string       `yaml:"depends_on" json:"depends_on,omitempty"`
}

// Problem is one thing wrong with a definition, with its line.
type Problem struct {
	File string
	Line int
	Path string // e.g. tasks[2].depends_on[0]
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Path, p.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", p.File, p.Path, p.Msg)
}

// Problems is every problem of a definition.
type Problems []Problem

func (ps Problems) Error() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Limits of a definition.
const (
	MaxBytes = 1 << 20
	MaxTasks = 1000
)

var (
	idPattern  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	refPattern = regexp.MustCompile(`\$\{([^}]*)\}`)
	refForm    = regexp.MustCompile(`^([a-zA-Z0-9_-]{1,64})\.output((?:\.[a-zA-Z0-9_-]+)*)$`)
)

// Parse reads a definition (YAML, or JSON, which is YAML) and checks it:
// unique task ids; known tools (known reports whether a tool exists);
// dependencies that exist, without cycles (a cycle is reported with its
// path); references ${task.output.path} only to a task's own
// dependencies. The error is Problems, each with its line, or a problem
// with the document itself.
func Parse(data []byte, file string, known func(tool string) bool) (*Definition, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: %d bytes; a workflow is at most %d", file, len(data), MaxBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the file is empty; a workflow has tasks", file)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var def Definition
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&def); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	v := &checker{file: file, lines: lines(&root)}
	v.check(&def, known)
	if len(v.probs) > 0 {
		return nil, v.probs
	}
	return &def, nil
}

// Check checks a definition built in code or decoded from a request by
// Parse's rules; its problems name their paths (there are no lines).
func Check(def *Definition, file string, known func(tool string) bool) error {
	v := &checker{file: file, lines: map[string]int{}}
	v.check(def, known)
	if len(v.probs) > 0 {
		return v.probs
	}
	return nil
}

type checker struct {
	file  string
	lines map[string]int // path -> line
	probs Problems
}

func (v *checker) add(path, format string, args ...any) {
	line := 0
	for p := path; p != ""; {
		if l, ok := v.lines[p]; ok {
			line = l
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	v.probs = append(v.probs, Problem{File: v.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *checker) check(def *Definition, known func(string) bool) {
	if len(def.Tasks) == 0 {
		v.add("tasks", "no tasks: a workflow needs at least one")
		return
	}
	if len(def.Tasks) > MaxTasks {
		v.add("tasks", "%d tasks; at most %d", len(def.Tasks), MaxTasks)
		return
	}
	index := map[string]int{}
	graphOK := true // ids unique and every dependency known: cycles can be looked for
	for i, t := range def.Tasks {
		p := fmt.Sprintf("tasks[%d]", i)
		switch {
		case !idPattern.MatchString(t.ID):
			v.add(p+".id", "%q: must match ^[a-zA-Z0-9_-]{1,64}$", t.ID)
			graphOK = false
		default:
			if j, dup := index[t.ID]; dup {
				v.add(p+".id", "%q: the same id as tasks[%d]", t.ID, j)
				graphOK = false
			} else {
				index[t.ID] = i
			}
		}
		if t.Tool == "" {
			v.add(p+".tool", "missing")
		} else if known != nil && !known(t.Tool) {
			v.add(p+".tool", "unknown tool %q", t.Tool)
		}
	}
	for i, t := range def.Tasks {
		p := fmt.Sprintf("tasks[%d]", i)
		for k, d := range t.DependsOn {
			switch _, ok := index[d]; {
			case d == t.ID:
				v.add(fmt.Sprintf("%s.depends_on[%d]", p, k), "%q depends on itself", d)
				graphOK = false
			case !ok:
				v.add(fmt.Sprintf("%s.depends_on[%d]", p, k), "unknown task %q", d)
				graphOK = false
			}
		}
		v.refs(p+".args", t.Args, t.DependsOn)
		if len(t.Args) > 0 {
			// the audit log and the workflow's records keep what its
			// readers take: no names that differ only in letter case
			raw, err := canonjson.AppendValue(nil, t.Args, nil)
			if err == nil {
				err = canonjson.Check(raw)
			}
			if err != nil {
				v.add(p+".args", "%v", err)
			}
		}
	}
	if graphOK {
		if cycle := findCycle(def.Tasks, index); cycle != nil {
			v.add(fmt.Sprintf("tasks[%d].depends_on", index[cycle[0]]), "a cycle: %s", strings.Join(cycle, " → "))
		}
	}
}

// refs checks the ${...} references in args: ${task.output[.path]} to a
// task the args' task depends on.
func (v *checker) refs(path string, val any, deps []string) {
	switch x := val.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v.refs(path+"."+k, x[k], deps)
		}
	case []any:
		for i, e := range x {
			v.refs(fmt.Sprintf("%s[%d]", path, i), e, deps)
		}
	case string:
		for _, m := range refPattern.FindAllStringSubmatch(x, -1) {
			ref := refForm.FindStringSubmatch(m[1])
			switch {
			case ref == nil:
				v.add(path, "%q: a reference is ${task_id.output} or ${task_id.output.path.to.field}", m[0])
			case !slices.Contains(deps, ref[1]):
				v.add(path, "%q refers to task %q, which is not among this task's depends_on", m[0], ref[1])
			}
		}
		if strings.Count(x, "${") != len(refPattern.FindAllString(x, -1)) {
			v.add(path, "%q: an unclosed ${", x)
		}
	}
}

// findCycle returns the tasks of a dependency cycle, first repeated last,
// or nil.
func findCycle(tasks []Task, index map[string]int) []string {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(tasks))
	var stack []string
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		stack = append(stack, tasks[i].ID)
		for _, d := range tasks[i].DependsOn {
			j := index[d]
			switch state[j] {
			case open:
				k := slices.Index(stack, d)
				cycle = append(slices.Clone(stack[k:]), d)
				return true
			case unseen:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return false
	}
	for i := range tasks {
		if state[i] == unseen && visit(i) {
			return cycle
		}
	}
	return nil
}

// Layers returns the definition's topological layers: each layer's tasks
// depend only on tasks of earlier layers; within a layer, in file order.
func (d *Definition) Layers() ([][]Task, error) {
	level := map[string]int{}
	remaining := slices.Clone(d.Tasks)
	var layers [][]Task
	for len(remaining) > 0 {
		var layer, rest []Task
		for _, t := range remaining {
			ready := true
			for _, dep := range t.DependsOn {
				if l, ok := level[dep]; !ok || l >= len(layers) {
					ready = false
				}
			}
			if ready {
				layer = append(layer, t)
			} else {
				rest = append(rest, t)
			}
		}
		if len(layer) == 0 {
			return nil, errors.New("workflow: a dependency cycle")
		}
		for _, t := range layer {
			level[t.ID] = len(layers)
		}
		layers = append(layers, layer)
		remaining = rest
	}
	return layers, nil
}

// lines maps each node's path (tasks[1].depends_on[0]) to its line.
func lines(root *yaml.Node) map[string]int {
	out := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				out[p] = n.Content[i].Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				out[p] = c.Line
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return out
}
