package probe

import (
	"fmt"
	"slices"
	"strings"
)

// Frame is a kind of sentence that holds a command's words, or an item's
// name, and asks for nothing: what people say around commands.
type Frame string

// The frames, in the order reports list them. Each is a set of
// templates (see frameTemplates); "{}" is the command's phrase.
const (
	FrameNegation    Frame = "negation"    // "don't {}", "no need to {}"
	FrameQuestion    Frame = "question"    // "did you {}?", "should i {}?"
	FrameReport      Frame = "report"      // "she wants to {}", "i already {}"
	FrameStatement   Frame = "statement"   // "{} is the first step of the runbook"
	FrameConditional Frame = "conditional" // "if it fails again, {}", "{} unless someone objects"
	FrameSequence    Frame = "sequence"    // "{} and then tell me how it went"
	FramePlan        Frame = "plan"        // "i will {} later"
	FrameColleague   Frame = "colleague"   // "sam, can you {}?": a question to someone else
	FrameQuote       Frame = "quote"       // "> {}⏎what do you think?": a quoted suggestion
	FrameLaughter    Frame = "laughter"    // "{} 😂 as if that works", "{} lol"
	FrameHesitation  Frame = "hesitation"  // "hold on, let me check before we {}"
	FrameReminder    Frame = "reminder"    // "remind me to {} tomorrow", "note to self: {}"
	FrameOtherWorld  Frame = "other-world" // another world's object with the same words: "play the {item} board game"
	FrameMention     Frame = "mention"     // an item's name said without asking: "i like {item}"
)

// AllFrames returns every frame, in report order.
func AllFrames() []Frame {
	return []Frame{FrameNegation, FrameQuestion, FrameReport, FrameStatement, FrameConditional, FrameSequence, FramePlan, FrameColleague,
		FrameQuote, FrameLaughter, FrameHesitation, FrameReminder, FrameOtherWorld, FrameMention}
}

// ParseFrames reads a comma-separated list of frame names ("all" is every
// frame); an unknown name is an error that lists the known ones.
func ParseFrames(s string) ([]Frame, error) {
	var out []Frame
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			continue
		case name == "all":
			out = append(out, AllFrames()...)
		case slices.Contains(AllFrames(), Frame(name)):
			out = append(out, Frame(name))
		default:
			var known []string
			for _, f := range AllFrames() {
				known = append(known, string(f))
			}
			return nil, fmt.Errorf("unknown frame %q (frames: all, %s)", name, strings.Join(known, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no frame named in %q", s)
	}
	var ordered []Frame // in report order, each once
	for _, f := range AllFrames() {
		if slices.Contains(out, f) {
			ordered = append(ordered, f)
		}
	}
	return ordered, nil
}

// frameTemplates are the sentences of each frame around a command's
// phrase ({}). {name} is a colleague's name that is no word of the
// configuration. None of them asks the assistant for the command now:
// each must be handed to the LLM.
var frameTemplates = map[Frame][]string{
	FrameNegation: {
		"don't {}", "do not {}", "never {}", "please don't {}", "no need to {}", "you shouldn't {}",
	},
	FrameQuestion: {
		"did you {}?", "should i {}?", "why would you {}?", "did she {} yesterday?", "what happens if i {}?",
	},
	FrameReport: {
		"she wants to {}", "he asked me to {}", "they said to {}", "my boss would {}", "i used to {}",
		"i already {}", "yesterday i had to {}", "we never {} on mondays", "somebody tried to {} this morning",
	},
	FrameStatement: {
		"{} is the first step of the runbook", "{} was the last thing on yesterday's list",
		"the manual says {} fixes it",
	},
	FrameConditional: {
		"if it fails again, {}", "{} if nobody answers by noon", "{} unless someone objects",
		"once the backup is done, {}", "when the meeting ends {}",
	},
	FrameSequence: {
		"{} and then tell me how it went", "first check the logs, then {}", "{} then undo it right away",
		"{}, after that send me the summary",
	},
	FramePlan: {
		"i will {} later", "we are going to {} next week", "tomorrow i'll {}", "the plan is to {} on friday",
	},
	FrameColleague: {
		"{name}, can you {}?", "hey {name}, could you {} when you get in?", "@{name} please {}", "{name} did you {} already?",
	},
	FrameQuote: {
		"> {}\nwhat do you think?", "someone suggested \"{}\", thoughts?", "the ticket just says '{}'",
		"\"{}\" is what the runbook says",
	},
	FrameLaughter: {
		"{} 😂 as if that works", "{} lol", "haha {} yeah right", "{} 🙄 sure",
	},
	FrameHesitation: {
		"hold on, let me check before we {}", "not sure if i should {}", "maybe {}? not sure yet",
		"hmm, should we really {}", "wait, let me think about whether to {}",
		"i was wondering whether it makes sense to {} at some point next month, what do you think about the idea in general",
	},
	FrameReminder: {
		"remind me to {} tomorrow", "note to self: {}", "todo: {} after lunch", "don't let me forget to {}",
	},
}

// otherObjects follow an item's name to make it another world's object
// ("play the abbey road board game"); otherPlaces follow a phrase without
// an item ("browse the albums in minecraft"). Those with a word of the
// configuration are left out for it: they would not be another world's.
var (
	otherObjects = []string{"board game", "t-shirt", "fan club", "costume"}
	otherPlaces  = []string{"in minecraft", "on ebay", "at the flea market"}
)

// colleagues are the names a question to a colleague is put to; the first
// two that are no word of the configuration are used.
var colleagues = []string{"sam", "priya", "jonas", "mei", "tomasz", "ines"}

// mentions are statements and questions that name an item ({}) without
// asking for anything — the bare name among them: it says what, not what
// to do with it.
var mentions = []string{
	"{}", "the {}", "{}?",
	"i like {}", "i saw {} yesterday", "{} is my favourite", "what do you think of {}?",
	"tell me about {}", "is {} any good?", "still working on {}", "{} again?",
	"a friend of mine keeps talking about {} all the time and i do not understand why",
}

// Templates returns the sentences of a frame around a command's phrase
// ({}; {name} is a colleague's name). The other-world frame puts one of
// its objects after an item's name ({} is the item) or one of its places
// after a phrase without one; the mention frame's {} is an item's name.
func Templates(f Frame) []string {
	switch f {
	case FrameMention:
		return slices.Clone(mentions)
	case FrameOtherWorld:
		var out []string
		for _, o := range otherObjects {
			out = append(out, "{} "+o)
		}
		for _, p := range otherPlaces {
			out = append(out, "{} "+p)
		}
		return out
	}
	return slices.Clone(frameTemplates[f])
}
