package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "agentplane")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "agentplane.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	// one unit of work: a new session and the first record of its chain
	s := &agentplane.Session{ID: "s1", Mode: "general", Version: 1}
	rec := &audit.Record{Session: "s1", Kind: audit.KindOpen, Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), State: s}
	if err := st.Commit(ctx, &store.Commit{SessionID: "s1", Session: s, Record: rec}); err != nil {
		fmt.Println(err)
		return
	}
	recs, _ := st.Records(ctx, "s1", 0)
	fmt.Println(len(recs), recs[0].Seq, audit.Verify(recs))
	// a commit on a version the store is past changes nothing
	err = st.Commit(ctx, &store.Commit{SessionID: "s1", Session: s})
	fmt.Println(agentplane.ErrorCode(err))
	// Output:
	// 1 1 <nil>
	// version_conflict
}
