package router

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/registry"
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
// active commands with examples, and only to open its picker. Otherwise
// similarity is not evidence: "show me my calendar" is close to "show me
// the templates" in letters and words, and a model of a handful of
// commands is confident about anything. Such a command is recognised only
// when the utterance has the shape of one of its examples or trigger
// phrasings (shape.go), and an executable command, which acts on an item,
// always is held to that.
const (
	minExamples = 20
	minCommands = 20
)

// trainExamples builds the example model from every command's examples
// and its triggers' phrasings (slot left out), and the negative examples
// as a class of their own. Labels number the commands that have any, in
// configuration order, then the negative class; it returns the command
// index of each command label, the negative label (-1 without negative
// examples), and a nil model when no command has examples.
//
// A prev router whose model was trained on the same examples gives its
// model instead of a new one trained (a model is never changed once
// trained).
func trainExamples(f trigger.Fillers, cmds []*agentplane.CommandDefinition, patterns [][]*trigger.Pattern, negatives []string, prev *Router) (*exemplar.Model, []int, int, [sha256.Size]byte, error) {
	var ex []exemplar.Example
	var labelCmd []int
	add := func(label int, words []string) {
		if w := evidence(f, words, nil); len(w) > 0 {
			ex = append(ex, exemplar.Example{Label: label, Text: strings.Join(w, " ")})
		}
	}
	for i, c := range cmds {
		label, before := len(labelCmd), len(ex)
		for _, e := range c.Examples {
			add(label, resolve.Fields(nil, resolve.Normalize(e)))
		}
		for _, p := range patterns[i] {
			for j := range p.Phrasings[:min(len(p.Phrasings), maxTriggerExamples)] {
				add(label, p.Phrasings[j].Words())
			}
		}
		if len(ex) > before {
			labelCmd = append(labelCmd, i)
		}
	}
	if len(ex) == 0 {
		return nil, nil, -1, [sha256.Size]byte{}, nil
	}
	neg := -1
	if len(negatives) > 0 {
		neg = len(labelCmd)
		for _, e := range negatives {
			add(neg, resolve.Fields(nil, resolve.Normalize(e)))
		}
	}
	key := trainingKey(ex)
	if prev != nil && prev.detector != nil && prev.trained == key {
		return prev.detector, labelCmd, neg, key, nil
	}
	m, err := exemplar.Train(ex, nil)
	return m, labelCmd, neg, key, err
}

// trainingKey identifies a training set: its examples' labels and texts
// in order.
func trainingKey(ex []exemplar.Example) [sha256.Size]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, e := range ex {
		h.Write(n[:binary.PutVarint(n[:], int64(e.Label))])
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(e.Text)))])
		h.Write([]byte(e.Text))
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// examples recognises an active command from its examples when no
// trigger matched: a command one of whose examples (or trigger phrasings)
// has the utterance's shape (see shape.go) — a launcher opens its picker,
// an executable command acts on the item named in the utterance. Beyond
// that, similarity alone decides only for a launcher with many examples
// among many commands (minExamples, minCommands), above the confidence
// threshold: it opens a picker, which runs nothing. Otherwise the turn
// goes to the LLM; the trace names the nearest command and examples.
func (t *turn) examples() (agentplane.Decision, error) {
	return t.examplesOr(agentplane.ReasonNoControlIntent)
}

// examplesOr is examples, going to the LLM with reason when no command is
// recognised.
func (t *turn) examplesOr(reason string) (agentplane.Decision, error) {
	if d, ok := t.matchExamples(); ok {
		return t.done(d)
	}
	return t.llm(reason)
}

// matchExamples is the work of examples: the decision, or false for none.
func (t *turn) matchExamples() (agentplane.Decision, bool) {
	if d, ok := t.shapeMatch(); ok {
		return d, true
	}
	r, ok := t.rt.classify(t.mode, t.in.Roles, t.normalizedWords())
	if !ok {
		return agentplane.Decision{}, false
	}
	if r.Label == t.rt.negLabel {
		t.buf = appendNum(append(t.buf, "examples: nearest are the negative examples (router.negative_examples), probability "...), r.Probability)
		t.buf = append(t.buf, '\n')
		for _, n := range r.Nearest {
			t.buf = append(append(append(t.buf, "  negative example \""...), n.Text...), "\" similarity "...)
			t.buf = append(appendNum(t.buf, n.Similarity), '\n')
		}
		return agentplane.Decision{}, false
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
		return agentplane.Decision{}, false
	}
	target := cmd
	if cmd.Kind == agentplane.KindLauncher {
		if c, ok := t.reg.Command(cmd.OnSelect); ok {
			target = c
		}
	}
	// a launcher's picker runs nothing: one with many examples among many
	// commands may be asked for in a paraphrase with a word or two of its
	// own; an executable is held to every word
	many := cmd.Kind == agentplane.KindLauncher && len(cmd.Examples) >= minExamples && r.Allowed >= minCommands
	if fw, tolerated := t.foreignWords(r.Label, target, target.Source, t.normalizedWords(), many); len(fw) > 0 {
		t.tracep("examples: not accounted for: \"", strings.Join(fw, "\", \""), "\" — no example, trigger, kind word or item of ", cmd.ID,
			" uses it: the utterance is about something else")
		return agentplane.Decision{}, false
	} else if tolerated != "" {
		t.tracep("examples: \"", tolerated, "\": no word of ", cmd.ID, "'s, but inside the utterance, as a paraphrase's may be (",
			strconv.Itoa(minExamples), "+ examples among ", strconv.Itoa(minCommands), "+ commands)")
	}
	if cmd.Kind != agentplane.KindLauncher {
		return t.paraphrase(cmd, r)
	}
	if why := t.rt.notRequest(t.rt.commandIdx[cmd.ID], t.normalizedWords()); why != "" {
		t.tracep("examples: ", why)
		return agentplane.Decision{}, false
	}
	if len(cmd.Examples) < minExamples || r.Allowed < minCommands {
		// A launcher runs nothing (it opens a picker): its own words,
		// reordered or recombined, may open it.
		if why := t.notAsked(cmd, t.normalizedWords()); why != "" {
			t.tracep("examples: ", why, " (similarity alone decides only for ",
				strconv.Itoa(minExamples), "+ examples among ", strconv.Itoa(minCommands), "+ commands)")
			return agentplane.Decision{}, false
		}
	}
	return t.browse(cmd), true
}

// paraphrase asks whether to run an executable command recognised by
// similarity, with no example of the utterance's shape ("could you give
// payments api a kick"): only for a command with many examples among many
// commands (as for launchers), on a request of a kind its examples have,
// naming exactly one item of its source. It never acts: the decision is
// one confirmation question — the command's own when it confirms anyway —
// and a "yes" runs it through the gate.
func (t *turn) paraphrase(cmd *agentplane.CommandDefinition, r exemplar.Result) (agentplane.Decision, bool) {
	if len(cmd.Examples) < minExamples || r.Allowed < minCommands {
		t.tracep("examples: no example of ", cmd.ID, " has the utterance's shape; an action is taken only on one that does (or asked about, with ",
			strconv.Itoa(minExamples), "+ examples among ", strconv.Itoa(minCommands), "+ commands)")
		return agentplane.Decision{}, false
	}
	words := t.normalizedWords()
	if why := t.rt.notRequest(t.rt.commandIdx[cmd.ID], words); why != "" {
		t.tracep("examples: ", why)
		return agentplane.Decision{}, false
	}
	if !t.reg.SourceActive(t.mode, t.in.Roles, cmd.Source) || len(words) > maxItemSearchWords {
		return agentplane.Decision{}, false
	}
	ix, err := t.index(cmd.Source)
	if err != nil {
		return agentplane.Decision{}, false
	}
	ws := newWordSpans(t.norm)
	s, e, item, ok := strictSpanIn(ix, ws, 0, ws.n)
	if !ok {
		t.tracep("examples: ", cmd.ID, " fits, but no words of the utterance name one item of ", cmd.Source.String())
		return agentplane.Decision{}, false
	}
	if t.otherItem(ix, ws, s, e, item) {
		return agentplane.Decision{}, false
	}
	label, asked := t.rt.cmdLabel[t.rt.commandIdx[cmd.ID]], false
	for i, w := range words {
		if (i < s || i >= e) && t.rt.own(label, w) {
			asked = true
			break
		}
	}
	if !asked {
		t.tracep("examples: besides its item, no word of the utterance is one of ", cmd.ID, "'s own: it names the item, it asks for nothing")
		return agentplane.Decision{}, false
	}
	if why := registry.Preconditions(cmd, t.mode, t.sess.AWC); why != "" {
		t.tracep("examples: ", cmd.ID, " fits, but its preconditions fail (", why, "): not asking")
		return agentplane.Decision{}, false
	}
	t.tracep("examples: ", cmd.ID, " recognised by similarity with \"", t.slotText(words, s, e), "\" as its item (", item.Header.ID,
		"): asking before acting, never acting on similarity alone")
	return agentplane.Decision{Action: agentplane.ActionAskQuestion, QuestionText: registry.ConfirmationQuestion(cmd, item.Header.DisplayName),
		Options: []string{"Yes", "No"}, CommandID: cmd.ID, ResolvedID: item.Header.ID}, true
}

// notAsked says why the words, politeness fillers aside, do not ask for
// the launcher cmd — one of them occurs in no example or trigger of cmd —
// or returns "" when they do.
func (t *turn) notAsked(cmd *agentplane.CommandDefinition, words []string) string {
	label := t.rt.cmdLabel[t.rt.commandIdx[cmd.ID]]
	for _, w := range t.rt.fillers.Strip(words) {
		if !t.rt.detector.Knows(label, w) {
			return "\"" + w + "\" occurs in no example or trigger of " + cmd.ID
		}
	}
	return ""
}

// classify runs the example model over the commands active in the mode
// for the roles that have examples, and the negative examples. The
// result's label is the negative label when they are nearest; Allowed
// counts the commands only.
func (r *Router) classify(mode string, roles []string, words []string) (exemplar.Result, bool) {
	var evBuf [32]string
	if words = evidence(r.fillers, words, evBuf[:0]); r.detector == nil || len(words) == 0 {
		return exemplar.Result{}, false
	}
	var buf [64]bool
	var allowed []bool
	if n := len(r.labelCmd) + 1; n <= len(buf) {
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
	if r.negLabel >= 0 && slices.Contains(allowed, true) {
		allowed[r.negLabel] = true
		res := r.detector.Classify(words, allowed)
		res.Allowed--
		return res, res.Label >= 0
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
	Negative    bool // the negative examples are nearer than any command's
	// Declined says why Route would not act on the match at any threshold
	// (the utterance is not a request of a kind the command's examples
	// have); "" when the threshold decides.
	Declined string
}

// MatchExamples returns the active command nearest to text by the
// examples, for tuning a threshold or explaining a decision. It reports
// false when no active command has examples, text has no words, or the
// negative examples are nearest (then Negative is set and Nearest holds
// them).
func (r *Router) MatchExamples(mode string, roles []string, text string) (ExampleMatch, bool) {
	res, ok := r.classify(mode, roles, resolve.Fields(nil, resolve.Normalize(text)))
	if !ok {
		return ExampleMatch{}, false
	}
	if res.Label == r.negLabel {
		return ExampleMatch{Negative: true, Probability: res.Probability, Similarity: res.Similarity, Nearest: res.Nearest}, false
	}
	ci := r.labelCmd[res.Label]
	return ExampleMatch{CommandID: r.commands[ci].ID, Confidence: res.Confidence(),
		Probability: res.Probability, Similarity: res.Similarity, Nearest: res.Nearest,
		Declined: r.notRequest(ci, resolve.Fields(nil, resolve.Normalize(text)))}, true
}

// appendNum appends f with three decimals.
func appendNum(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'f', 3, 64) }
