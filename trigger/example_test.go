package trigger_test

import (
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

func ExampleParse() {
	p, err := trigger.Parse("(switch|change|go) [over] to [the] {item} mode")
	if err != nil {
		panic(err)
	}
	for _, text := range []string{"Switch over to the DDR mode", "go to sales mode", "don't switch to ddr mode"} {
		words := resolve.Fields(nil, resolve.Normalize(text))
		if _, s, e, ok := p.Match(words); ok {
			fmt.Printf("%q -> {item} = %q\n", text, strings.Join(words[s:e], " "))
		} else {
			fmt.Printf("%q -> no match\n", text)
		}
	}
	fmt.Println(len(p.Phrasings), "phrasings")
	// Output:
	// "Switch over to the DDR mode" -> {item} = "ddr"
	// "go to sales mode" -> {item} = "sales"
	// "don't switch to ddr mode" -> no match
	// 12 phrasings
}

func ExamplePattern_Example() {
	p, _ := trigger.Parse("[i want to] (browse|see) [the] (ddrs|design decisions)")
	text, ok := p.Example()
	fmt.Println(text, ok)
	// Output:
	// i want to browse the ddrs true
}
