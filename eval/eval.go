// Package eval measures how a configuration routes labelled utterances:
// per-command precision and recall, the pairs of commands it confuses,
// how often it keeps from the LLM an utterance that must not act, each
// miss with the router's trace, and, for each command with examples, the
// example threshold that would serve this file best and what it would
// change. It is the tool for the people who write configurations.
//
//	cases, err := eval.Read(f)
//	rep := eval.Run(ctx, rt, cases, time.Now())
//	fmt.Println(rep.Accuracy)
package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/router"
)

// Case is one labelled utterance: a line of the file.
type Case struct {
	Text string `json:"text"`
	Mode string `json:"mode,omitempty"` // the default mode when empty
	UI   bool   `json:"ui,omitempty"`
	// Active is the item active in the session, if any.
	Active *Active `json:"active,omitempty"`
	Expect Expect  `json:"expect"`
	Line   int     `json:"-"`
}

// Active is an item active in a case's session.
type Active struct {
	EntityType  string `json:"entity_type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Expect is the decision a case should get. CommandID and ResolvedID are
// checked when given; an expected continue_with_llm is an utterance that
// must not act.
type Expect struct {
	Action     agentplane.Action `json:"action"`
	CommandID  string            `json:"command_id,omitempty"`
	ResolvedID string            `json:"resolved_id,omitempty"`
}

// Read decodes a JSON Lines file of cases; blank lines and lines starting
// with # are skipped. An error names the line and what is wrong with it.
func Read(r io.Reader) ([]Case, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), agentplane.MaxInputBytes+4096)
	var out []Case
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var c Case
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("line %d: more than one JSON value", n)
		}
		switch c.Expect.Action {
		case agentplane.ActionInvokeCommand, agentplane.ActionOpenPicker, agentplane.ActionAskQuestion, agentplane.ActionContinueLLM:
		case "":
			return nil, fmt.Errorf("line %d: expect.action is missing", n)
		default:
			return nil, fmt.Errorf("line %d: expect.action %q is not a decision (invoke_command, open_picker, ask_clarifying_question, continue_with_llm)", n, c.Expect.Action)
		}
		if c.Expect.Action != agentplane.ActionContinueLLM && c.Expect.CommandID == "" {
			return nil, fmt.Errorf("line %d: expect.command_id is missing for %s", n, c.Expect.Action)
		}
		if c.Active != nil && (c.Active.EntityType == "" || c.Active.ID == "") {
			return nil, fmt.Errorf("line %d: active needs entity_type and id", n)
		}
		c.Line = n
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", len(out)+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cases")
	}
	return out, nil
}

// CommandScore is how well one command was recognised.
type CommandScore struct {
	CommandID           string
	Expected, Predicted int // cases expecting it; decisions naming it
	Correct             int // both
	Precision, Recall   float64
}

// Confusion is a pair of commands one was taken for the other, and how
// often ("" is continue_with_llm).
type Confusion struct {
	Expected, Got string
	Count         int
}

// Miss is a case that got another decision.
type Miss struct {
	Case     Case
	Decision agentplane.Decision
}

// Suggestion is, for a command with examples, the example threshold at
// which its recognitions by similarity would serve this file best, and
// what that threshold would change against the configured one.
type Suggestion struct {
	CommandID  string
	Current    float64
	Threshold  float64
	Gained     int // cases of the command recognised at Threshold and not at Current
	Lost       int // cases of the command recognised at Current and not at Threshold
	FalseAdded int // cases of another decision it would take at Threshold and not at Current
	FalseGone  int // the other way round
}

// Report is what Run measured.
type Report struct {
	Cases, Correct int
	Accuracy       float64
	// MustNotAct counts the cases expecting continue_with_llm, and
	// Hijacked those of them that got any other decision.
	MustNotAct, Hijacked int
	Commands             []CommandScore // by command id
	Confusions           []Confusion    // most frequent first
	Misses               []Miss         // in file order
	Suggestions          []Suggestion   // by command id
}

// HijackRate is the share of must-not-act cases that were not handed to
// the LLM.
func (r Report) HijackRate() float64 {
	if r.MustNotAct == 0 {
		return 0
	}
	return float64(r.Hijacked) / float64(r.MustNotAct)
}

// Run routes every case (routing is pure: nothing runs, nothing is
// recorded) and measures. A case the router refuses (malformed text, an
// unknown mode) is a miss with a continue_with_llm decision carrying the
// error in its trace.
func Run(ctx context.Context, rt *router.Router, cases []Case, now time.Time) Report {
	rep := Report{Cases: len(cases)}
	scores := map[string]*CommandScore{}
	score := func(id string) *CommandScore {
		if scores[id] == nil {
			scores[id] = &CommandScore{CommandID: id}
		}
		return scores[id]
	}
	confusions := map[[2]string]int{}
	reg := rt.Registry()
	for _, c := range cases {
		sess := &agentplane.Session{ID: "eval", Mode: c.Mode, Version: 1}
		if c.Active != nil {
			sess.AWC = agentplane.ActiveWorkContext{EntityType: c.Active.EntityType,
				Entity: &agentplane.EntityHeader{ID: c.Active.ID, DisplayName: c.Active.DisplayName}}
		}
		var d agentplane.Decision
		var err error
		if c.Mode != "" && reg.ModeOf(c.Mode) != c.Mode {
			err = fmt.Errorf("mode %q is not configured", c.Mode)
		} else {
			d, err = rt.Route(ctx, sess, agentplane.TurnInput{Text: c.Text, UI: c.UI, Now: now})
		}
		if err != nil {
			d = agentplane.Decision{Action: agentplane.ActionContinueLLM, Trace: []string{"refused: " + err.Error()}}
		}
		got := ""
		if d.Action != agentplane.ActionContinueLLM {
			got = d.CommandID
		}
		want := c.Expect.CommandID
		if c.Expect.Action == agentplane.ActionContinueLLM {
			want = ""
			rep.MustNotAct++
			if d.Action != agentplane.ActionContinueLLM {
				rep.Hijacked++
			}
		}
		if want != "" {
			score(want).Expected++
		}
		if got != "" {
			score(got).Predicted++
		}
		ok := d.Action == c.Expect.Action && (want == "" || got == want) &&
			(c.Expect.ResolvedID == "" || d.ResolvedID == c.Expect.ResolvedID)
		if ok {
			rep.Correct++
			if want != "" {
				score(want).Correct++
			}
			continue
		}
		if got == want && want != "" {
			score(want).Correct++ // the right command, another action or item
		} else {
			confusions[[2]string{want, got}]++
		}
		rep.Misses = append(rep.Misses, Miss{Case: c, Decision: d})
	}
	rep.Accuracy = float64(rep.Correct) / float64(max(rep.Cases, 1))
	for _, s := range scores {
		if s.Predicted > 0 {
			s.Precision = float64(s.Correct) / float64(s.Predicted)
		}
		if s.Expected > 0 {
			s.Recall = float64(s.Correct) / float64(s.Expected)
		}
		rep.Commands = append(rep.Commands, *s)
	}
	slices.SortFunc(rep.Commands, func(a, b CommandScore) int { return strings.Compare(a.CommandID, b.CommandID) })
	for k, n := range confusions {
		rep.Confusions = append(rep.Confusions, Confusion{Expected: k[0], Got: k[1], Count: n})
	}
	slices.SortFunc(rep.Confusions, func(a, b Confusion) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Expected+"\x00"+a.Got, b.Expected+"\x00"+b.Got)
	})
	rep.Suggestions = suggest(rt, cases)
	return rep
}

// suggest finds, for each command the example model names for some case,
// the threshold that maximises its recognitions of its own cases minus
// those of other cases, among the confidences seen (lowest on ties, then
// the configured one when it is as good).
func suggest(rt *router.Router, cases []Case) []Suggestion {
	type point struct {
		conf float64
		own  bool
	}
	byCmd := map[string][]point{}
	for _, c := range cases {
		m, ok := rt.MatchExamples(rt.Registry().ModeOf(c.Mode), nil, c.Text)
		if !ok || m.Declined != "" {
			continue // no threshold makes the router act on it
		}
		want := c.Expect.CommandID
		if cmd, ok := rt.Registry().Command(m.CommandID); ok && cmd.Kind == agentplane.KindLauncher && cmd.OnSelect == want {
			want = m.CommandID // a launcher's decisions name its on_select command
		}
		byCmd[m.CommandID] = append(byCmd[m.CommandID], point{m.Confidence, want == m.CommandID && c.Expect.Action != agentplane.ActionContinueLLM})
	}
	cur := rt.Registry().Settings().ExampleThreshold
	var out []Suggestion
	for id, pts := range byCmd {
		at := func(th float64) (own, other int) {
			for _, p := range pts {
				if p.conf >= th {
					if p.own {
						own++
					} else {
						other++
					}
				}
			}
			return
		}
		best, bestScore := cur, 0
		o, f := at(cur)
		bestScore = o - f
		for _, p := range pts {
			if o, f := at(p.conf); o-f > bestScore || o-f == bestScore && p.conf < best && best != cur {
				best, bestScore = p.conf, o-f
			}
		}
		s := Suggestion{CommandID: id, Current: cur, Threshold: best}
		for _, p := range pts {
			now, then := p.conf >= cur, p.conf >= best
			switch {
			case p.own && then && !now:
				s.Gained++
			case p.own && now && !then:
				s.Lost++
			case !p.own && then && !now:
				s.FalseAdded++
			case !p.own && now && !then:
				s.FalseGone++
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Suggestion) int { return strings.Compare(a.CommandID, b.CommandID) })
	return out
}
