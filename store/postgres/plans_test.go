package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/plantest"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
)

// reached are fragments of statements (plantest.Normal) of the PostgreSQL
// store's own the workload must have run, besides plantest.Reached.
var reached = []string{
	"DO UPDATE SET state = 'done'", // a request finished under its key
	"UPDATE confirmations SET used = TRUE WHERE pending = ?",
	"UPDATE confirmations SET used = TRUE WHERE digest = ?",
	"FROM unnest(?::text[]) AS id", // the chain heads of sessions other instances write to
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	Type      string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Alias     string     `json:"Alias"`
	Index     string     `json:"Index Name"`
	Direction string     `json:"Scan Direction"`
	Cond      string     `json:"Index Cond"`
	Recheck   string     `json:"Recheck Cond"`
	Filter    string     `json:"Filter"`
	Rows      float64    `json:"Plan Rows"`
	Plans     []planNode `json:"Plans"`
}

// scan is a node that reads a table: its table (a bitmap index scan's is
// its heap scan's) and the node.
type scan struct {
	table string
	node  planNode
}

// plan is one plan of a statement, its scans in order and its text.
type plan struct {
	kind  string // custom or generic
	scans []scan
	text  string
}

func (p *plan) walk(n planNode, table string, depth int) {
	if n.Relation != "" {
		table = n.Relation
	}
	line := strings.Repeat("  ", depth) + n.Type
	if n.Direction == "Backward" {
		line += " Backward"
	}
	if n.Index != "" {
		line += " using " + n.Index
	}
	if n.Relation != "" {
		line += " on " + n.Relation
	}
	if n.Cond != "" {
		line += " (" + n.Cond + ")"
	}
	if n.Filter != "" {
		line += " filter " + n.Filter
	}
	p.text += fmt.Sprintf("        %s  rows=%.0f\n", line, n.Rows)
	switch n.Type {
	case "Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		p.scans = append(p.scans, scan{table: table, node: n})
	}
	for _, c := range n.Plans {
		p.walk(c, table, depth+1)
	}
}

func parsePlan(kind string, raw []byte) (plan, error) {
	var out []struct{ Plan planNode }
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return plan{}, fmt.Errorf("EXPLAIN's JSON: %v: %s", err, raw)
	}
	p := plan{kind: kind}
	p.walk(out[0].Plan, "", 0)
	return p, nil
}

// explainPlans returns the statement's custom plan (planned with the
// arguments it first ran with) and its generic plan (planned knowing no
// argument, as a prepared statement's after five runs may be).
func explainPlans(ctx context.Context, conn *pgx.Conn, i int, query string, args []any) ([]plan, error) {
	var raw []byte
	if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+query, args...).Scan(&raw); err != nil {
		return nil, fmt.Errorf("custom plan: %w", err)
	}
	custom, err := parsePlan("custom", raw)
	if err != nil {
		return nil, err
	}
	// PostgreSQL 15 has no EXPLAIN (GENERIC_PLAN): the statement prepared,
	// forced to its generic plan, explained as executed with NULLs (which a
	// generic plan never sees)
	name := fmt.Sprintf("plantest_%d", i)
	simple := pgx.QueryExecModeSimpleProtocol
	if _, err := conn.Exec(ctx, `PREPARE `+name+` AS `+query, simple); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	defer conn.Exec(ctx, `DEALLOCATE `+name, simple)
	nulls := make([]string, params(query))
	for j := range nulls {
		nulls[j] = "NULL"
	}
	execute := `EXECUTE ` + name
	if len(nulls) > 0 {
		execute += `(` + strings.Join(nulls, ", ") + `)`
	}
	if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+execute, simple).Scan(&raw); err != nil {
		return nil, fmt.Errorf("generic plan: %w", err)
	}
	generic, err := parsePlan("generic", raw)
	if err != nil {
		return nil, err
	}
	return []plan{custom, generic}, nil
}

// params is the highest $n of query.
func params(query string) int {
	n := 0
	for _, m := range paramRE.FindAllStringSubmatch(query, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	return n
}

var paramRE = regexp.MustCompile(`\$(\d+)`)

func readSchema(t *testing.T, ctx context.Context, conn *pgx.Conn) plantest.Schema {
	t.Helper()
	sc := plantest.Schema{Columns: map[string]map[string]bool{}, Indexes: map[string][]plantest.Index{}}
	rows, err := conn.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			t.Fatal(err)
		}
		if sc.Columns[table] == nil {
			sc.Columns[table] = map[string]bool{}
		}
		sc.Columns[table][column] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = conn.Query(ctx, `SELECT t.relname, i.relname, x.indpred IS NOT NULL,
			array(SELECT COALESCE(a.attname, '') FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
				LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.n)
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
		WHERE t.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table string
		var ix plantest.Index
		if err := rows.Scan(&table, &ix.Name, &ix.Partial, &ix.Cols); err != nil {
			t.Fatal(err)
		}
		sc.Indexes[table] = append(sc.Indexes[table], ix)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// allowed are plan steps that read more than the statement's own rows on
// purpose; each with why. Keyed by a fragment of the statement
// (plantest.Normal), the plan (custom, generic, or "" for both) and a
// fragment of the step. (None now.)
var allowed = []struct{ query, plan, step, why string }{}

// expected are constraints a statement's plans must show, which the rules
// of badScan cannot tell from the statement: keyed by a fragment of the
// statement (plantest.Normal).
var expected = []struct{ query, step, why string }{
	{"AND (created, id) < (?, ?)", "ROW(created, id) <", "a page of sessions starts at its cursor, not at the owner's newest"},
}

// allowance is why a scan that badScan would refuse is allowed, if it is.
func allowance(query string, p plan, step string) (string, bool) {
	for _, a := range allowed {
		if strings.Contains(plantest.Normal(query), a.query) && (a.plan == "" || a.plan == p.kind) && strings.Contains(step, a.step) {
			return a.why, true
		}
	}
	return "", false
}

// condTerms are the terms of an Index Cond, ANDed: each its column and
// whether it is an equality (= a value, = ANY an array).
func condTerms(cond string) (cols []string, eq []bool) {
	cond = strings.TrimSuffix(strings.TrimPrefix(cond, "("), ")")
	for _, term := range strings.Split(cond, ") AND (") {
		m := termRE.FindStringSubmatch(term)
		if m == nil {
			cols, eq = append(cols, ""), append(eq, false)
			continue
		}
		cols, eq = append(cols, m[1]), append(eq, m[2] == "=")
	}
	return cols, eq
}

var termRE = regexp.MustCompile(`^\(*(?:\w+\.)?(\w+)\)?\s*(=|<>|<=|>=|<|>|~~)`)

// badScan says what is wrong with a scan of a statement's plan, or ""
// when nothing is:
//   - a Seq Scan of a table that grows (one not in plantest.FixedTables);
//   - an index scan with no Index Cond of an index that is not partial: a
//     walk of all of it (an index of only some rows is walked for its
//     order, as the dead letters' newest first);
//   - an index scan whose every Index Cond term is on a column of
//     plantest.WeakColumns, unless its index is partial: then it holds
//     only the rows of those values the statement looks for;
//   - an index scan by fewer of the statement's equality columns than
//     another index of the table has as its leading columns (a partial
//     index the statement does not say it may use, or a key it does not
//     use).
func badScan(sc plantest.Schema, query string, s scan) string {
	tb := s.table
	if _, ok := sc.Columns[tb]; !ok || plantest.FixedTables[tb] {
		return ""
	}
	n := s.node
	if n.Type == "Seq Scan" {
		return "reads all of " + tb
	}
	ix, _ := findIndex(sc, tb, n.Index)
	if n.Cond == "" {
		if ix.Partial {
			return ""
		}
		return "walks all of " + n.Index + ", an index of every row of " + tb
	}
	cols, eq := condTerms(n.Cond)
	weak, used := true, 0
	for i, c := range cols {
		if !plantest.WeakColumns[c] {
			weak = false
		}
		if eq[i] && c != "" && !plantest.WeakColumns[c] {
			used++
		}
	}
	if weak && !ix.Partial {
		return "finds its rows of " + tb + " by " + n.Cond + " alone: every user's rows with those values"
	}
	return sc.FewerKeys(query, tb, n.Index, used)
}

func findIndex(sc plantest.Schema, table, name string) (plantest.Index, bool) {
	for _, ix := range sc.Indexes[table] {
		if ix.Name == name {
			return ix, true
		}
	}
	return plantest.Index{}, false
}

// TestEveryStatementFindsItsRows runs every acting and reading path of
// the product once (plantest.Drive: turns, confirmations, idempotent
// requests, audit pages, sessions, workflows, notifications, the
// watchdog) on a database full of other sessions', users' and
// principals' rows, ANALYZEd, and asks PostgreSQL how it plans every
// distinct statement the store ran, twice: its custom plan (EXPLAIN with
// the arguments it first ran with) and its generic plan (prepared, with
// plan_cache_mode force_generic_plan: the plan a prepared statement —
// pgx caches them per connection — may keep after five runs, which knows
// no argument). Neither may read a table that grows from end to end,
// find its rows by an index of a column with a handful of values, or by
// fewer of its key columns than another index holds (badScan), unless
// allowed says why. -v prints every statement with both plans.
func TestEveryStatementFindsItsRows(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	st, err := postgres.Open(ctx, url, &postgres.Options{Extensions: plane.Extensions})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range plantest.Fill(store.Postgres) {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("background: %v\n%s", err, q)
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	got := plantest.NewStatements()
	st.Trace(got.Add)
	other := func(ctx context.Context) (store.Store, error) {
		return postgres.Open(ctx, url, &postgres.Options{Extensions: plane.Extensions})
	}
	plantest.Drive(t, ctx, plantest.Target{Store: st, Other: other}, plantest.NewClock(), got)
	st.Trace(nil)
	plantest.CheckReached(t, got, reached...)

	sc := readSchema(t, ctx, conn)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	failed := 0
	for i, q := range got.Order() {
		plans, err := explainPlans(ctx, conn, i, q, got.Args(q))
		if err != nil {
			t.Errorf("explain statement #%d: %v\n%s", i, err, q)
			continue
		}
		fmt.Fprintf(&table, "\n#%d %s\n", i, plantest.OneLine(q))
		for _, p := range plans {
			fmt.Fprintf(&table, "    %s:\n", p.kind)
			lines := strings.Split(strings.TrimSuffix(p.text, "\n"), "\n")
			for _, s := range p.scans {
				why := badScan(sc, q, s)
				if why == "" {
					continue
				}
				step := s.node.Type + " using " + s.node.Index + " on " + s.table + " (" + s.node.Cond + ")"
				if s.node.Type == "Seq Scan" {
					step = "Seq Scan on " + s.table
				}
				if allow, ok := allowance(q, p, step); ok {
					lines = append(lines, "        ~~ "+step+" [allowed: "+allow+"]")
					continue
				}
				failed++
				lines = append(lines, "        !! "+step+": "+why)
				t.Errorf("statement #%d %s\n  %s plan: %s %s\n%s", i, plantest.OneLine(q), p.kind, step, why, p.text)
			}
			for _, e := range expected {
				if strings.Contains(plantest.Normal(q), e.query) && !slices.ContainsFunc(p.scans, func(s scan) bool { return strings.Contains(s.node.Cond, e.step) }) {
					failed++
					lines = append(lines, "        !! no Index Cond with "+e.step)
					t.Errorf("statement #%d %s\n  %s plan has no Index Cond with %s: %s\n%s", i, plantest.OneLine(q), p.kind, e.step, e.why, p.text)
				}
			}
			table.WriteString(strings.Join(lines, "\n") + "\n")
		}
	}
	t.Logf("%d distinct statements, %d bad plans' scans:%s", len(got.Order()), failed, table.String())
}

// TestBadScan checks the audit's rules on scans PostgreSQL plans: each
// case is a plan step the audit must refuse or pass.
func TestBadScan(t *testing.T) {
	sc := plantest.Schema{
		Columns: map[string]map[string]bool{"notifications": {"id": true, "address_key": true, "seq": true, "dedup_key": true, "state": true, "user_id": true, "channel": true, "updated": true}},
		Indexes: map[string][]plantest.Index{"notifications": {
			{Name: "notifications_pkey", Cols: []string{"id"}},
			{Name: "notifications_address_key_seq_key", Cols: []string{"address_key", "seq"}},
			{Name: "notifications_dedup", Cols: []string{"address_key", "dedup_key"}, Partial: true},
			{Name: "notifications_by_state", Cols: []string{"state", "updated"}},
			{Name: "notifications_dead", Cols: []string{"state", "updated"}, Partial: true},
		}},
	}
	dedup := `SELECT id FROM notifications WHERE address_key = $1 AND dedup_key = $2`
	byState := `SELECT id FROM notifications WHERE state = $1`
	for _, c := range []struct {
		name, query string
		node        planNode
		bad         bool
	}{
		{"SeqScan", byState, planNode{Type: "Seq Scan", Relation: "notifications"}, true},
		{"ByKey", `SELECT id FROM notifications WHERE id = $1`, planNode{Type: "Index Scan", Index: "notifications_pkey", Cond: "(id = $1)"}, false},
		{"FewerKeysThanAnIndex", dedup, planNode{Type: "Bitmap Index Scan", Index: "notifications_address_key_seq_key", Cond: "(address_key = $1)"}, true},
		{"AllKeys", dedup, planNode{Type: "Index Scan", Index: "notifications_dedup", Cond: "((address_key = $1) AND (dedup_key = $2))"}, false},
		{"WeakColumnAlone", byState, planNode{Type: "Bitmap Index Scan", Index: "notifications_by_state", Cond: "(state = 'ESCALATED'::text)"}, true},
		{"WeakColumnsAlone", byState, planNode{Type: "Index Scan", Index: "notifications_by_state", Cond: "(state = ANY (ARRAY[$1, $2]))"}, true},
		{"WeakColumnOfAPartialIndex", byState, planNode{Type: "Index Scan", Index: "notifications_dead", Cond: "(state = $1)"}, false},
		{"WeakColumnAndARange", `SELECT id FROM notifications WHERE state = 'LOCKED' AND updated <= $1`, planNode{Type: "Bitmap Index Scan", Index: "notifications_by_state", Cond: "((state = 'LOCKED'::text) AND (updated <= $1))"}, false},
		{"WalkOfAnIndex", `SELECT id FROM notifications ORDER BY id LIMIT 1`, planNode{Type: "Index Scan", Index: "notifications_pkey"}, true},
		{"WalkOfAPartialIndex", `SELECT id FROM notifications WHERE state = 'FAILED' ORDER BY updated DESC LIMIT $1`, planNode{Type: "Index Scan", Index: "notifications_dead", Direction: "Backward"}, false},
		{"FixedTable", `SELECT version FROM schema_version`, planNode{Type: "Seq Scan", Relation: "schema_version"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := c.node.Relation
			if table == "" {
				table = "notifications"
			}
			why := badScan(sc, c.query, scan{table: table, node: c.node})
			if (why != "") != c.bad {
				t.Errorf("badScan(%s %s (%s)) = %q, want bad %v", c.node.Type, c.node.Index, c.node.Cond, why, c.bad)
			}
		})
	}
}
