package router

import (
	"strconv"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

// maxTriggerExamples bounds how many phrasings of one trigger pattern
// become examples, so a pattern with many optional parts does not outweigh
// the examples written by hand.
const maxTriggerExamples = 32

// maxSlotWords is the longest run of words tried as a recognised command's
// item, and maxItemSearchWords the longest utterance searched for one (a
// longer one is no command, and the search grows with its length).
const (
	maxSlotWords       = 6
	maxItemSearchWords = 32
)

// Recognition rests on similarity alone only for a launcher with at least
// minExamples hand-written examples, chosen among at least minCommands
// active commands with examples. Otherwise similarity is not evidence:
// "show me my calendar" is close to "show me the templates" in letters and
// words, and a model of a handful of commands is confident about anything.
// Such a command is recognised only when every word of the utterance (its
// item and politeness fillers aside) occurs in its examples or triggers:
// reordered, shortened or recombined phrasings of what its author wrote.
// An executable command, which acts on an item, is always held to that.
const (
	minExamples = 20
	minCommands = 20
)

// trainExamples builds the example model from every command's examples
// and its triggers' phrasings (slot left out). Labels number the commands
// that have any, in configuration order; it returns the command index of
// each label, and a nil model when no command has examples.
func trainExamples(cmds []*agentplane.CommandDefinition, patterns [][]*trigger.Pattern) (*exemplar.Model, []int, error) {
	var ex []exemplar.Example
	var labelCmd []int
	for i, c := range cmds {
		label, before := len(labelCmd), len(ex)
		for _, e := range c.Examples {
			ex = append(ex, exemplar.Example{Label: label, Text: e})
		}
		for _, p := range patterns[i] {
			for j := range p.Phrasings[:min(len(p.Phrasings), maxTriggerExamples)] {
				if w := p.Phrasings[j].Words(); len(w) > 0 {
					ex = append(ex, exemplar.Example{Label: label, Text: strings.Join(w, " ")})
				}
			}
		}
		if len(ex) > before {
			labelCmd = append(labelCmd, i)
		}
	}
	if len(ex) == 0 {
		return nil, nil, nil
	}
	m, err := exemplar.Train(ex, nil)
	return m, labelCmd, err
}

// examples recognises an active command from the examples when no trigger
// matched. Below the confidence threshold the turn goes to the LLM. A
// recognised launcher opens its picker; a recognised executable command
// still needs its item named in the utterance (the longest run of words
// that resolves strictly in its source): an item id is never guessed.
func (t *turn) examples() (agentplane.Decision, error) {
	r, ok := t.rt.classify(t.mode, t.in.Roles, t.normalizedWords())
	if !ok {
		return t.llm(agentplane.ReasonNoControlIntent)
	}
	cmd := t.rt.commands[t.rt.labelCmd[r.Label]]
	conf, th := r.Confidence(), t.reg.Settings().ExampleThreshold
	verdict := " ≥ "
	if conf < th {
		verdict = " < "
	}
	t.buf = append(t.buf, "examples: nearest command "...)
	t.buf = append(t.buf, cmd.ID...)
	t.buf = appendNum(append(t.buf, ", confidence "...), conf)
	t.buf = appendNum(append(append(t.buf, verdict...), "threshold "...), th)
	t.buf = appendNum(append(t.buf, " (probability "...), r.Probability)
	t.buf = appendNum(append(t.buf, ", similarity "...), r.Similarity)
	t.buf = appendNum(append(t.buf, ", word coverage "...), r.Coverage)
	t.buf = append(t.buf, ")\n"...)
	for _, n := range r.Nearest {
		t.buf = append(append(append(t.buf, "  example \""...), n.Text...), "\" similarity "...)
		t.buf = append(appendNum(t.buf, n.Similarity), '\n')
	}
	if conf < th {
		return t.llm(agentplane.ReasonNoControlIntent)
	}
	if cmd.Kind == agentplane.KindLauncher {
		if len(cmd.Examples) < minExamples || r.Allowed < minCommands {
			if why := t.notAsked(cmd, t.normalizedWords(), 0, 0); why != "" {
				t.tracep("examples: ", why, " (similarity alone decides only for ",
					strconv.Itoa(minExamples), "+ examples among ", strconv.Itoa(minCommands), "+ commands)")
				return t.llm(agentplane.ReasonNoControlIntent)
			}
		}
		return t.done(t.browse(cmd))
	}
	return t.done(t.namedItem(cmd))
}

// namedItem looks for the item of a command recognised from its examples:
// the longest, then earliest, run of the utterance's words that resolves
// strictly in the command's source. Every other word must occur in the
// command's examples or triggers (or be a politeness filler): an action
// is taken only on words its author wrote down, so "don't switch to ddr
// mode" and "should I switch to ddr mode?" never switch.
func (t *turn) namedItem(cmd *agentplane.CommandDefinition) agentplane.Decision {
	llm := agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonNoControlIntent}
	words := t.normalizedWords()
	if len(words) > maxItemSearchWords {
		t.tracep("examples: ", strconv.Itoa(len(words)), " words are too many for a command")
		return llm
	}
	if !t.reg.SourceActive(t.mode, t.in.Roles, cmd.Source) {
		t.tracef("%s is not active in mode %q", cmd.Source, t.mode)
		return llm
	}
	ix, err := t.index(cmd.Source)
	if err != nil {
		return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonSourceUnavailable}
	}
	for n := min(len(words), maxSlotWords); n > 0; n-- {
		for s := 0; s+n <= len(words); s++ {
			span := t.slotText(words, s, s+n)
			if res := ix.ResolveExact(span, 2); res.Strict() {
				item := ix.Item(res.Items[0])
				k, id := kindOf(cmd.Source)
				t.tracep("item named in the utterance: \"", span, "\" is ", item.Header.ID, " in ", k, id)
				if why := t.notAsked(cmd, words, s, s+n); why != "" {
					t.tracep("examples: ", why, "; not acting on it")
					return llm
				}
				return t.invokeOrConfirm(cmd, item)
			}
		}
	}
	t.tracep(cmd.ID, " recognised, but no item of its source is named in the utterance")
	return llm
}

// notAsked says why the words outside words[s:e] and the leading and
// trailing politeness fillers do not ask for cmd — one of them occurs in
// no example or trigger of cmd, or none is left — or returns "" when they
// do.
func (t *turn) notAsked(cmd *agentplane.CommandDefinition, words []string, s, e int) string {
	label := t.rt.cmdLabel[t.rt.commandIdx[cmd.ID]]
	kept := t.rt.fillers.Strip(words)
	base := cap(words) - cap(kept) // index of kept[0] in words
	checked := 0
	for i, w := range kept {
		if j := base + i; j >= s && j < e {
			continue
		}
		checked++
		if !t.rt.detector.Knows(label, w) {
			return "\"" + w + "\" occurs in no example or trigger of " + cmd.ID
		}
	}
	if checked == 0 {
		return "the utterance names only the item; nothing asks for " + cmd.ID
	}
	return ""
}

// classify runs the example model over the commands active in the mode
// for the roles that have examples.
func (r *Router) classify(mode string, roles []string, words []string) (exemplar.Result, bool) {
	if r.detector == nil || len(words) == 0 {
		return exemplar.Result{}, false
	}
	var buf [64]bool
	var allowed []bool
	if n := len(r.labelCmd); n <= len(buf) {
		allowed = buf[:n]
	} else {
		allowed = make([]bool, n)
	}
	for _, tb := range r.reg.ModeToolboxes(mode) {
		if !tb.Allows(roles) {
			continue
		}
		for _, i := range r.reg.ToolboxCommands(tb.ID) {
			if l := r.cmdLabel[i]; l >= 0 {
				allowed[l] = true
			}
		}
	}
	res := r.detector.Classify(words, allowed)
	return res, res.Label >= 0
}

// ExampleMatch is the command an utterance is nearest to by the examples,
// before the confidence threshold and the other checks Route applies.
type ExampleMatch struct {
	CommandID   string
	Confidence  float64 // what Route compares with router.example_threshold
	Probability float64 // the command's probability among the active commands with examples
	Similarity  float64 // cosine similarity to its nearest example
	Nearest     []exemplar.Neighbor
}

// MatchExamples returns the active command nearest to text by the
// examples, for tuning a threshold or explaining a decision. It reports
// false when no active command has examples or text has no words.
func (r *Router) MatchExamples(mode string, roles []string, text string) (ExampleMatch, bool) {
	res, ok := r.classify(mode, roles, resolve.Fields(nil, resolve.Normalize(text)))
	if !ok {
		return ExampleMatch{}, false
	}
	return ExampleMatch{CommandID: r.commands[r.labelCmd[res.Label]].ID, Confidence: res.Confidence(),
		Probability: res.Probability, Similarity: res.Similarity, Nearest: res.Nearest}, true
}

// appendNum appends f with three decimals.
func appendNum(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'f', 3, 64) }
