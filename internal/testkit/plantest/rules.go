package plantest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Reached are fragments of statements (as Normal writes them) the workload
// runs on every store: the paths least easy to reach (a path it stops
// reaching is not audited).
var Reached = []string{
	"AND user_id = ?) OR (id = ?",           // a batch of acks
	"AND dedup_key = ? AND dedup_key <> ''", // an emit over a live deduplication key
	"UPDATE notifications SET shows = shows + 1",
	"FROM notifications WHERE state = 'FAILED'",
	"AND (created, id) < (?, ?)",                             // a second page of sessions
	"FROM audit WHERE session = ? ORDER BY seq DESC LIMIT 1", // a stale chain head
	"FROM workflows WHERE status IN (",
	"UPDATE workflows SET owner = ?",                                  // a workflow taken over
	"UPDATE workflows SET lease_until = 0",                            // released
	"AND c.request_id = ?",                                            // a command under its idempotency key
	"AND pause = ? AND pause <> ''",                                   // an answered decision
	"WITH oldest AS (SELECT MIN(cp_n) AS n FROM",                      // more checkpoints than kept
	"AND EXISTS (SELECT 1 FROM workflows WHERE id = ? AND lease = ?)", // a queued command rejected by its holder
	followWorkflows,
	followInbox,
	"INSERT INTO configs",
	"FROM catalog_versions WHERE version = ?",
}

// The followers' statements (driveFollowers).
const (
	followWorkflows = "SELECT id, seq FROM workflows WHERE id IN (" // the workflow streams' read of the last events
	followInbox     = "FROM notifications WHERE channel = 'A' AND"  // the inbox streams' look for notifications stored since
)

// CheckReached fails t for each fragment of Reached and of more (a
// store's own) that no statement of got holds.
func CheckReached(t *testing.T, got *Statements, more ...string) {
	t.Helper()
	order := got.Order()
	for _, r := range append(slices.Clone(Reached), more...) {
		if !slices.ContainsFunc(order, func(q string) bool { return strings.Contains(Normal(q), r) }) {
			t.Errorf("the workload ran no statement with %q", r)
		}
	}
}

// Normal is a statement on one line, its whitespace collapsed and its
// PostgreSQL placeholders ($1) written as SQLite's (?).
func Normal(q string) string {
	return placeholderRE.ReplaceAllString(OneLine(q), "?")
}

var placeholderRE = regexp.MustCompile(`\$\d+`)

// OneLine is a statement on one line, its whitespace collapsed.
func OneLine(q string) string { return strings.Join(strings.Fields(q), " ") }

// FixedTables hold a row per migration or extension: never more than a
// few.
var FixedTables = map[string]bool{"schema_version": true, "schema_extensions": true}

// WeakColumns are columns with a handful of values: an index step that
// finds rows by them alone reads a share of every user's rows.
var WeakColumns = map[string]bool{"state": true, "status": true, "channel": true, "used": true, "address": true}

// KeyColumns are the columns a statement's WHERE compares for equality
// (= a value or a parameter, IN a list, = ANY an array), by name, of any
// of its tables.
func KeyColumns(query string) map[string]bool {
	where := Normal(query)
	if i := strings.Index(where, " WHERE "); i >= 0 {
		where = where[i:]
	}
	out := map[string]bool{}
	for _, m := range keyRE.FindAllStringSubmatch(where, -1) {
		out[m[1]] = true
	}
	return out
}

var keyRE = regexp.MustCompile(`(\w+)\s*(?:=\s*(?:\?|'|\d|ANY\b)|IN\s*\()`)

// Aliases maps a statement's table aliases to their tables.
func Aliases(query string) map[string]string {
	out := map[string]string{}
	for _, m := range aliasRE.FindAllStringSubmatch(query, -1) {
		out[m[2]] = m[1]
	}
	return out
}

var aliasRE = regexp.MustCompile(`(?:FROM|JOIN)\s+(\w+)\s+(?:AS\s+)?(\w+)\s+(?:ON|WHERE|JOIN)`)

// Prefix is how many of an index's leading columns are among keys, weak
// columns not counted (an index of them is no better).
func Prefix(cols []string, keys map[string]bool) int {
	n := 0
	for _, c := range cols {
		if !keys[c] {
			break
		}
		if !WeakColumns[c] {
			n++
		}
	}
	return n
}

// Schema is what the plan rules know of a database: its tables, each with
// its columns and indexes.
type Schema struct {
	Columns map[string]map[string]bool // table → its columns
	Indexes map[string][]Index         // table → its indexes, the primary key's too
}

// Index is an index's name (as the database's plans name it) and columns
// (an expression's as ""), and whether it is partial (holds only the rows
// its WHERE names).
type Index struct {
	Name    string
	Cols    []string
	Partial bool
}

// FewerKeys says how a plan that finds its rows of table in the index
// named in, by used of the statement's key columns, reads more than it
// must — another index of the table leads with more of them — or "".
func (s Schema) FewerKeys(query, table, in string, used int) string {
	keys := map[string]bool{}
	for c := range KeyColumns(query) {
		if s.Columns[table][c] {
			keys[c] = true
		}
	}
	for _, ix := range s.Indexes[table] {
		if n := Prefix(ix.Cols, keys); n > used {
			return fmt.Sprintf("finds its rows of %s in %s by %d of the statement's key columns, where %s has %d: %v", table, in, used, ix.Name, n, ix.Cols[:n])
		}
	}
	return ""
}
