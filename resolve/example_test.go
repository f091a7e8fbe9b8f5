package resolve_test

import (
	"fmt"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
)

func ExampleNormalize() {
	fmt.Println(resolve.Normalize("  Café-Crème: Q1 — CFO Outreach! "))
	// Output: cafe creme q1 cfo outreach
}

func ExampleIndex_Resolve() {
	ix, _ := resolve.NewIndex([]agentplane.ResolverItem{
		{Header: agentplane.EntityHeader{ID: "TPL-123", DisplayName: "Q1 CFO Outreach"}, Aliases: []string{"cfo outreach"}},
		{Header: agentplane.EntityHeader{ID: "TPL-124", DisplayName: "Q1 CTO Outreach"}},
	})
	for _, q := range []string{"cfo outreach", "outreach", "q1 cfo outr", "q1 cfo outraech", "zebra"} {
		r := ix.Resolve(q, 5)
		var ids []string
		for _, i := range r.Items {
			ids = append(ids, ix.Item(i).Header.ID)
		}
		fmt.Printf("%-16s %-6s strict=%-5v %v\n", q, r.Tier, r.Strict(), ids)
	}
	// Output:
	// cfo outreach     exact  strict=true  [TPL-123]
	// outreach         token  strict=false [TPL-123 TPL-124]
	// q1 cfo outr      prefix strict=false [TPL-123]
	// q1 cfo outraech  fuzzy  strict=false [TPL-123]
	// zebra            none   strict=false []
}
