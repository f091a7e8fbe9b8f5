package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/plantest"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
)

// planStep is a row of EXPLAIN QUERY PLAN.
type planStep struct {
	id, parent int
	detail     string
}

func explain(db *sql.DB, query string, args []any) ([]planStep, error) {
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []planStep
	for rows.Next() {
		var s planStep
		var unused int
		if err := rows.Scan(&s.id, &s.parent, &unused, &s.detail); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// reached are fragments of statements (plantest.Normal) of the SQLite
// store's own the workload must have run, besides plantest.Reached.
var reached = []string{
	"UPDATE OR FAIL notifications SET state", // a batch of acks
	"UPDATE requests SET seq = ?",
	"UPDATE confirmations SET used = 1 WHERE pending = ?",
	"UPDATE confirmations SET used = 1 WHERE digest = ?",
}

// allowed are plan steps that read more than the statement's own rows on
// purpose; each with why. Keyed by a fragment of the statement and the
// step's detail. (None now.)
var allowed = []struct{ query, step, why string }{}

// expected are constraints a statement's plan must show, which the rules
// of badStep cannot tell from the statement: keyed by a fragment of the
// statement.
var expected = []struct{ query, step, why string }{
	{"AND (created, id) < (?, ?)", "(owner=? AND (created,id)<(?,?))", "a page of sessions starts at its cursor, not at the owner's newest"},
}

func readSchema(t *testing.T, db *sql.DB) plantest.Schema {
	t.Helper()
	sc := plantest.Schema{Columns: map[string]map[string]bool{}, Indexes: map[string][]plantest.Index{}}
	names := func(query string, args ...any) []string {
		rows, err := db.Query(query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	for _, table := range names(`SELECT name FROM sqlite_master WHERE type = 'table'`) {
		sc.Columns[table] = map[string]bool{}
		for _, c := range names(`SELECT name FROM pragma_table_info(?)`, table) {
			sc.Columns[table][c] = true
		}
		for _, name := range names(`SELECT name FROM pragma_index_list(?)`, table) {
			ix := plantest.Index{Name: name, Cols: names(`SELECT name FROM pragma_index_info(?) ORDER BY seqno`, name)}
			ix.Partial = slices.Contains(names(`SELECT partial FROM pragma_index_list(?) WHERE name = ?`, table, name), "1")
			if slices.Contains(names(`SELECT origin FROM pragma_index_list(?) WHERE name = ?`, table, name), "pk") {
				ix.Name = "PRIMARY KEY" // a WITHOUT ROWID table's
			}
			sc.Indexes[table] = append(sc.Indexes[table], ix)
		}
	}
	return sc
}

// allowance is why a plan step that badStep would refuse is allowed, if
// it is.
func allowance(query, detail string) (string, bool) {
	for _, a := range allowed {
		if strings.Contains(plantest.OneLine(query), a.query) && strings.Contains(detail, a.step) {
			return a.why, true
		}
	}
	return "", false
}

// badStep says what is wrong with a plan step of a statement, or "" when
// nothing is:
//   - a SCAN of a table that grows (one not in plantest.FixedTables), unless of a
//     covering index;
//   - a SEARCH whose every constraint is on a column of plantest.WeakColumns (the
//     acks' plan over the index by state, since dropped), unless its index is partial: then it
//     holds only the rows of those values the statement looks for (the
//     watchdog's, the dead letters);
//   - a SEARCH by fewer of the statement's equality columns than another
//     index of the table has as its leading columns (a partial index the
//     statement does not say it may use, or a key it does not use);
//   - a statement of expected whose plan lacks the constraint it names.
func badStep(sc plantest.Schema, query, detail string) string {
	table := func(name string) string {
		if _, ok := sc.Columns[name]; ok {
			return name
		}
		return plantest.Aliases(query)[name]
	}
	if m := scanRE.FindStringSubmatch(detail); m != nil {
		if tb := table(m[1]); tb != "" && !plantest.FixedTables[tb] && !strings.Contains(detail, "COVERING INDEX") {
			return "reads all of " + tb
		}
		return ""
	}
	m := searchRE.FindStringSubmatch(detail)
	if m == nil {
		return ""
	}
	tb := table(m[1])
	if tb == "" || plantest.FixedTables[tb] {
		return ""
	}
	terms := strings.Split(m[3], " AND ")
	weak := true
	used, leading := 0, true // the leading equality constraints
	for _, c := range terms {
		col := columnRE.FindStringSubmatch(c)[1]
		if !plantest.WeakColumns[col] {
			weak = false
		}
		leading = leading && strings.HasSuffix(c, "=?") && !strings.ContainsAny(c, "<>")
		if leading && !plantest.WeakColumns[col] {
			used++
		}
	}
	if weak && !slices.ContainsFunc(sc.Indexes[tb], func(ix plantest.Index) bool { return ix.Partial && "INDEX "+ix.Name == m[2] }) {
		return "finds its rows of " + tb + " by " + m[3] + " alone: every user's rows with those values"
	}
	return sc.FewerKeys(query, tb, m[2], used)
}

var (
	scanRE   = regexp.MustCompile(`^SCAN (\w+)`)
	searchRE = regexp.MustCompile(`^SEARCH (\w+) USING (?:COVERING )?(PRIMARY KEY|INDEX \w+|INTEGER PRIMARY KEY) \((.*)\)$`)
	columnRE = regexp.MustCompile(`^\(?(\w+)`)
)

// TestEveryStatementFindsItsRows runs every acting and reading path of
// the product once (plantest.Drive: turns, confirmations, idempotent
// requests, audit pages, sessions, workflows, notifications, the
// watchdog, the followers) on a database full of other sessions', users'
// and principals' rows (plantest.Fill), and asks SQLite
// (EXPLAIN QUERY PLAN, with the arguments each statement first ran with)
// how it plans every distinct statement the store ran: none may read a
// table that grows with use from end to end, find its rows by an index
// of a column with a handful of values (the plan SQLite chose for
// notify's batched acks, which read every live notification per batch),
// or by fewer of its key columns than another index holds (badStep),
// unless allowed says why. -v prints every statement with its plan.
func TestEveryStatementFindsItsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	st, err := sqlite.Open(ctx, path, &sqlite.Options{Extensions: plane.Extensions, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := sqlite.OpenRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range plantest.Fill(store.SQLite) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("background: %v\n%s", err, q)
		}
	}
	got := plantest.NewStatements()
	st.Trace(got.Add)
	other := func(ctx context.Context) (store.Store, error) {
		return sqlite.Open(ctx, path, &sqlite.Options{Extensions: plane.Extensions, Synchronous: "NORMAL"})
	}
	plantest.Drive(t, ctx, plantest.Target{Store: st, Other: other}, plantest.NewClock(), got)
	st.Trace(nil)
	plantest.CheckReached(t, got, reached...)

	sc := readSchema(t, db)
	var table strings.Builder
	failed := 0
	for i, q := range got.Order() {
		steps, err := explain(db, q, got.Args(q))
		if err != nil {
			t.Errorf("explain statement %d: %v\n%s", i, err, q)
			continue
		}
		fmt.Fprintf(&table, "\n#%d %s\n", i, plantest.OneLine(q))
		for _, s := range steps {
			mark := "  "
			if why, ok := allowance(q, s.detail); ok && badStep(sc, q, s.detail) != "" {
				mark = "~~"
				s.detail += "  [allowed: " + why + "]"
			} else if why := badStep(sc, q, s.detail); why != "" {
				mark = "!!"
				failed++
				t.Errorf("statement #%d %s\n  plan step %q %s", i, plantest.OneLine(q), s.detail, why)
			}
			fmt.Fprintf(&table, "   %s %s\n", mark, s.detail)
		}
		for _, e := range expected {
			if strings.Contains(plantest.OneLine(q), e.query) && !slices.ContainsFunc(steps, func(s planStep) bool { return strings.Contains(s.detail, e.step) }) {
				failed++
				t.Errorf("statement #%d %s\n  plan %v has no step by %s: %s", i, plantest.OneLine(q), steps, e.step, e.why)
			}
		}
	}
	t.Logf("%d distinct statements, %d bad plan steps:%s", len(got.Order()), failed, table.String())
}
