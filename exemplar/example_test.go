package exemplar_test

import (
	"fmt"

	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/resolve"
)

func ExampleTrain() {
	m, _ := exemplar.Train([]exemplar.Example{
		{Label: 0, Text: "what is the weather in paris"},
		{Label: 0, Text: "will it rain in oslo tomorrow"},
		{Label: 1, Text: "play some jazz"},
		{Label: 1, Text: "put on my running playlist"},
	}, nil)
	r := m.Classify(resolve.Fields(nil, resolve.Normalize("Will it rain in Paris?")), nil)
	fmt.Println(r.Label, r.Nearest[0].Text)
	// Output: 0 will it rain in oslo tomorrow
}
