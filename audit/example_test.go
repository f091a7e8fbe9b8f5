package audit_test

import (
	"fmt"
	"time"

	"github.com/agentplane/agentplane/audit"
)

func ExampleVerify() {
	var chain []audit.Record
	var seq int64
	var prev string
	for i := 0; i < 3; i++ {
		r := &audit.Record{Session: "s1", Kind: audit.KindExecution, Time: time.Date(2026, 11, 25, 12, 0, i, 0, time.UTC)}
		audit.Seal(r, seq, prev) // what a store does when it appends; r.Raw is the line it stores
		seq, prev = r.Seq, r.Hash
		chain = append(chain, *r)
	}
	fmt.Println(audit.Verify(chain))
	forged, _ := audit.Decode([]byte(string(chain[1].Raw[:len(chain[1].Raw)-1]) + `,"extra":1}`))
	chain[1] = forged
	fmt.Println(audit.Verify(chain))
	// Output:
	// <nil>
	// session s1, record 2 (seq 2): hash mismatch: the record was edited
}
