package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/gonum/graph/network"
	"gonum.org/v1/gonum/graph/simple"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/resolve"
)

// Replan is what replan_dag asks for: a requirement in words for the
// workflow as it stands, with the context the asker found.
type Replan struct {
	Workflow    *Workflow
	Requirement string
	Context     json.RawMessage // a JSON object, or empty
}

// Plan is a suggester's answer: tasks to add after the current layer, and
// why.
type Plan struct {
	Tasks []Task
	Why   string
}

// Suggester turns a replan_dag request into tasks. The engine checks what
// it suggests like any definition before adding it.
type Suggester interface {
	Suggest(ctx context.Context, r Replan) (Plan, error)
}

// rankSuggester is the deterministic suggester: it matches the
// requirement against the usage texts of the tools active for the
// workflow's session (the router's example recognition, package
// exemplar), weighs each match by the tool's PageRank in the co-usage
// graph of past workflows (an edge for each dependency between two tools'
// tasks), and adds the best tool whose required arguments the context
// supplies, after the tasks of the layer that just ran.
type rankSuggester struct {
	core Sessions
	j    journal
}

// candidate is a tool the requirement may ask for.
type candidate struct {
	name       string
	similarity float64
	rank       float64
	score      float64
}

func (s *rankSuggester) Suggest(ctx context.Context, r Replan) (Plan, error) {
	w := r.Workflow
	sess, err := s.core.Session(ctx, w.SessionID)
	if err != nil {
		return Plan{}, err
	}
	active := s.core.ActiveTools(sess.Mode, w.Roles)
	if len(active) == 0 {
		return Plan{}, errors.New("no tools are active for the workflow's session")
	}
	var examples []exemplar.Example
	for i, t := range active {
		examples = append(examples, exemplar.Example{Label: i, Text: strings.ReplaceAll(t.Spec.Name, "_", " ")})
		for _, sentence := range strings.FieldsFunc(t.Spec.Usage, func(r rune) bool { return r == '.' || r == ';' || r == '\n' }) {
			if strings.TrimSpace(sentence) != "" {
				examples = append(examples, exemplar.Example{Label: i, Text: sentence})
			}
		}
	}
	model, err := exemplar.Train(examples, nil)
	if err != nil {
		return Plan{}, err
	}
	words := resolve.Fields(nil, resolve.Normalize(r.Requirement))
	ranks, err := s.ranks(ctx, w.Principal)
	if err != nil {
		return Plan{}, err
	}
	var cands []candidate
	only := make([]bool, len(active))
	for i, t := range active {
		only[i] = true
		res := model.Classify(words, only)
		only[i] = false
		if res.Label != i || res.Similarity <= 0 {
			continue
		}
		cands = append(cands, candidate{name: t.Spec.Name, similarity: res.Similarity, rank: ranks[t.Spec.Name]})
	}
	if len(cands) == 0 {
		return Plan{}, fmt.Errorf("no active tool's usage matches %q", r.Requirement)
	}
	// the rank weighs the match: with no history every tool ranks alike
	top := 0.0
	for _, c := range cands {
		top = max(top, c.rank)
	}
	for i := range cands {
		f := 1.0
		if top > 0 {
			f = 0.5 + 0.5*cands[i].rank/top
		}
		cands[i].score = cands[i].similarity * f
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	var ctxArgs map[string]any
	if len(r.Context) > 0 {
		json.Unmarshal(r.Context, &ctxArgs)
	}
	var missing []string
	for _, c := range cands {
		args, lack := fill(s.core.View(), c.name, ctxArgs)
		if len(lack) > 0 {
			missing = append(missing, fmt.Sprintf("%s needs %s", c.name, strings.Join(lack, ", ")))
			continue
		}
		t := Task{ID: newTaskID(w, c.name), Tool: c.name, Args: args, DependsOn: lastLayer(w)}
		why := fmt.Sprintf("%q matched %s (similarity %.2f, co-usage rank %.3f, score %.3f)", r.Requirement, c.name, c.similarity, c.rank, c.score)
		if len(args) > 0 {
			keys := make([]string, 0, len(args))
			for k := range args {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			why += "; arguments from available_context: " + strings.Join(keys, ", ")
		}
		return Plan{Tasks: []Task{t}, Why: why}, nil
	}
	return Plan{}, fmt.Errorf("the tools matching %q need arguments available_context does not give: %s", r.Requirement, strings.Join(missing, "; "))
}

// fill takes a tool's arguments from the context: every property of its
// input schema the context has, by name; it returns the required ones
// missing.
func fill(v core.View, name string, ctxArgs map[string]any) (map[string]any, []string) {
	t, ok := v.Tool(name)
	if !ok {
		return nil, []string{"(not registered)"}
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	json.Unmarshal(t.Spec.InputSchema, &schema)
	args := map[string]any{}
	for p := range schema.Properties {
		if v, ok := ctxArgs[p]; ok {
			args[p] = v
		}
	}
	var lack []string
	for _, p := range schema.Required {
		if _, ok := args[p]; !ok {
			lack = append(lack, p)
		}
	}
	return args, lack
}

// newTaskID names an added task after its tool, unique in the workflow
// over its life: no task has it, and no rollback dropped one that had it.
func newTaskID(w *Workflow, tool string) string {
	base := tool
	if len(base) > 56 {
		base = base[:56]
	}
	for n := 1; ; n++ {
		id := fmt.Sprintf("%s_r%d", base, n)
		if w.task(id) == nil && !slices.Contains(w.Dropped, id) {
			return id
		}
	}
}

// lastLayer returns the tasks that completed in the workflow's latest
// layer: what added tasks run after.
func lastLayer(w *Workflow) []string {
	var out []string
	for _, t := range w.Tasks {
		if t.Layer == w.Layer && t.Status == TaskCompleted {
			out = append(out, t.ID)
		}
	}
	return out
}

// ranks is the PageRank of each tool in the co-usage graph of the
// principal's past workflows (the last 200): an edge from a task's tool
// to the tool of each task depending on it, weighted by how often.
func (s *rankSuggester) ranks(ctx context.Context, principal string) (map[string]float64, error) {
	past, err := s.j.list(ctx, principal, 200)
	if err != nil {
		return nil, err
	}
	ids := map[string]int64{}
	weights := map[[2]int64]float64{}
	id := func(name string) int64 {
		if n, ok := ids[name]; ok {
			return n
		}
		ids[name] = int64(len(ids))
		return ids[name]
	}
	for _, w := range past {
		for _, t := range w.Tasks {
			if t.Status != TaskCompleted {
				continue
			}
			for _, d := range t.DependsOn {
				if dt := w.task(d); dt != nil && dt.Tool != t.Tool {
					weights[[2]int64{id(dt.Tool), id(t.Tool)}]++
				}
			}
		}
	}
	out := map[string]float64{}
	if len(weights) == 0 {
		return out, nil
	}
	g := simple.NewWeightedDirectedGraph(0, 0)
	for _, n := range ids {
		g.AddNode(simple.Node(n))
	}
	for e, wt := range weights {
		g.SetWeightedEdge(g.NewWeightedEdge(simple.Node(e[0]), simple.Node(e[1]), wt))
	}
	pr := network.PageRankSparse(g, 0.85, 1e-8)
	for name, n := range ids {
		out[name] = pr[n]
	}
	return out, nil
}
