package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// Extension is the workflows' tables: each workflow's document with its
// owner's lease (a fencing token every claim increments and every write
// checks), its events (a row a commit, with the checkpoint the commit
// saved: its last KeepCheckpoints are kept), its tasks' states (the
// current ones and those the checkpoints hold), and its command queue.
var Extension = store.Extension{
	Name: "workflow",
	Migrations: map[string][]string{
		store.SQLite:   {schema("INTEGER"), taskSchema("INTEGER"), answerSchema, closeSQLite, leanSQLite, statesInHistory, eventsPerCommit("INTEGER", "json_extract(workflow_events.data, '$.checkpoint_id')"), replacedSQLite},
		store.Postgres: {schema("BIGINT"), taskSchema("BIGINT"), answerSchema, closePostgres, leanPostgres, statesInHistory, eventsPerCommit("BIGINT", "workflow_events.data::jsonb ->> 'checkpoint_id'"), replacedPostgres},
	},
}

// taskSchema is migration 2: a workflow's tasks move out of its document
// into a row each, so a write costs what changed, not the workflow's
// size; a checkpoint keeps the workflow's document without its tasks,
// and workflow_task_history each task's states over the checkpoints, a
// row valid from one checkpoint (since) until another (until, exclusive).
// Documents written before it keep their tasks inside, and are read as
// they are. Queued commands get an index of their own: a workflow's
// applied ones are not read past to find them.
func taskSchema(integer string) string {
	return strings.ReplaceAll(`
CREATE TABLE workflow_tasks (
    workflow_id TEXT NOT NULL,
    id          TEXT NOT NULL,
    n           INT NOT NULL,     -- order within the workflow
    state       TEXT NOT NULL,    -- the TaskRun, JSON
    PRIMARY KEY (workflow_id, id)
);
CREATE TABLE workflow_task_history (
    workflow_id TEXT NOT NULL,
    id          TEXT NOT NULL,
    since       INT NOT NULL,     -- the first checkpoint (its n) that holds this state
    until       INT NOT NULL,     -- the first that does not; openUntil while current
    n           INT NOT NULL,
    state       TEXT NOT NULL,    -- the TaskRun, JSON
    PRIMARY KEY (workflow_id, id, since)
);
CREATE INDEX workflow_task_history_until ON workflow_task_history (workflow_id, until, id);
CREATE INDEX workflow_commands_queued ON workflow_commands (workflow_id, seq) WHERE status = 'queued';`, "INT ", integer+" ")
}

// answerSchema is migration 3: a pause is answered once. A workflow's
// row names the pause it waits at (pause), each command the pause it
// answers and its idempotency key (request_id, with the digest of what
// it asked); no two applied commands answer one pause and no two commands
// share a key — in the commit that moves the workflow, whatever instance
// makes it. code is a refused command's error code.
const answerSchema = `
ALTER TABLE workflows ADD COLUMN pause TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_commands ADD COLUMN pause TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_commands ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_commands ADD COLUMN request_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_commands ADD COLUMN code TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX workflow_commands_by_request ON workflow_commands (workflow_id, request_id) WHERE request_id <> '';
CREATE UNIQUE INDEX workflow_commands_answer ON workflow_commands (workflow_id, pause) WHERE pause <> '' AND status = 'applied';`

// closeSQLite and closePostgres are migration 4: a task's new state in
// workflow_task_history ends the one it replaces (sets its until to the
// new one's since) as it is inserted, so recording a task's state at a
// checkpoint is one statement, not two. (A task dropped, or the states
// of a workflow taken over, are still ended by an UPDATE of their own.)
const (
	closeSQLite = `
CREATE TRIGGER workflow_task_history_close AFTER INSERT ON workflow_task_history
BEGIN
    UPDATE workflow_task_history SET until = NEW.since
    WHERE workflow_id = NEW.workflow_id AND until = 4611686018427387904 AND id = NEW.id AND since < NEW.since;
END;`
	closePostgres = `
CREATE FUNCTION workflow_task_history_close() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workflow_task_history SET until = NEW.since
    WHERE workflow_id = NEW.workflow_id AND until = 4611686018427387904 AND id = NEW.id AND since < NEW.since;
    RETURN NULL;
END $$;
CREATE TRIGGER workflow_task_history_close AFTER INSERT ON workflow_task_history
    FOR EACH ROW EXECUTE FUNCTION workflow_task_history_close();`
)

// leanSQLite and leanPostgres are migration 5: a commit writes fewer
// B-trees (in SQLite's WAL a page each at least; in PostgreSQL an index
// entry each). workflow_task_history loses its index on until: migration
// 4's trigger and the reads find a task's states by the primary key (in
// PostgreSQL the trigger's update of until can then stay on its page);
// workflow_checkpoints its unique index on id: a checkpoint's id names its
// workflow (<workflow id>-c<n>), and every read names both. (Keyed by
// their primary keys alone, WITHOUT ROWID, the tables cost as much: their
// rows are large, and a commit's split more pages.)
const (
	leanSQLite = `
DROP INDEX workflow_task_history_until;
CREATE TABLE workflow_checkpoints_new (
    workflow_id TEXT NOT NULL,
    n           INTEGER NOT NULL,
    id          TEXT NOT NULL,
    layer       INTEGER NOT NULL,
    state       TEXT NOT NULL,
    created     INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, n)
);
INSERT INTO workflow_checkpoints_new SELECT workflow_id, n, id, layer, state, created FROM workflow_checkpoints;
DROP TABLE workflow_checkpoints;
ALTER TABLE workflow_checkpoints_new RENAME TO workflow_checkpoints;`
	leanPostgres = `
DROP INDEX workflow_task_history_until;
ALTER TABLE workflow_checkpoints DROP CONSTRAINT workflow_checkpoints_id_key;`
)

// statesInHistory is migration 6: a task's current state is its row in
// workflow_task_history that nothing has ended (until is openUntil), and
// workflow_tasks goes — a write records a changed task once, in one table,
// where it recorded it in both. A current state that no checkpoint holds
// yet is a row from one past the workflow's last checkpoint: each state
// in workflow_tasks that its task's open row does not hold becomes such a
// row (migration 4's trigger ends the row it replaces), and the open rows
// of tasks no longer there end there.
const statesInHistory = `
INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state)
SELECT t.workflow_id, t.id, COALESCE((SELECT MAX(c.n) FROM workflow_checkpoints c WHERE c.workflow_id = t.workflow_id), 0) + 1, 4611686018427387904, t.n, t.state
FROM workflow_tasks t
WHERE NOT EXISTS (SELECT 1 FROM workflow_task_history h
    WHERE h.workflow_id = t.workflow_id AND h.id = t.id AND h.until = 4611686018427387904 AND h.n = t.n AND h.state = t.state);
UPDATE workflow_task_history SET until = COALESCE((SELECT MAX(c.n) FROM workflow_checkpoints c WHERE c.workflow_id = workflow_task_history.workflow_id), 0) + 1
WHERE until = 4611686018427387904 AND NOT EXISTS (SELECT 1 FROM workflow_tasks t
    WHERE t.workflow_id = workflow_task_history.workflow_id AND t.id = workflow_task_history.id);
DROP TABLE workflow_tasks;`

// eventsPerCommit is migration 7: a commit's events are one row of
// workflow_events (eventRows), keyed by the last one's seq, where each
// was a row, and a checkpoint is the cp_ columns of the row of the
// commit that saved it, where it was a row of workflow_checkpoints: one
// row a commit, not two, each a B-tree entry twice (the table and its
// key) in SQLite. Rows written before are one event each, and are read
// as such; each kept checkpoint moves to the row of its checkpoint_saved
// event (every checkpoint was saved with one). A workflow keeps its
// KeepCheckpoints newest checkpoints: the rows of older ones are not
// written again to drop them (it would cost a statement and a page a
// commit), and nothing reads them.
func eventsPerCommit(integer, checkpointOf string) string {
	return strings.ReplaceAll(strings.ReplaceAll(`
ALTER TABLE workflow_events ADD COLUMN cp_n INT NOT NULL DEFAULT 0;      -- the checkpoint the row's commit saved (its n); 0: none
ALTER TABLE workflow_events ADD COLUMN cp_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_events ADD COLUMN cp_layer INT NOT NULL DEFAULT 0;
ALTER TABLE workflow_events ADD COLUMN cp_state TEXT NOT NULL DEFAULT '';  -- the Workflow document when it was saved
ALTER TABLE workflow_events ADD COLUMN cp_created INT NOT NULL DEFAULT 0;
UPDATE workflow_events SET cp_n = c.n, cp_id = c.id, cp_layer = c.layer, cp_state = c.state, cp_created = c.created
FROM workflow_checkpoints c
WHERE c.workflow_id = workflow_events.workflow_id AND workflow_events.type = 'checkpoint_saved' AND c.id = CHECKPOINT;
DROP TABLE workflow_checkpoints;`, "INT ", integer+" "), "CHECKPOINT", checkpointOf)
}

// replacedSQLite and replacedPostgres are migration 8: a task's new state
// no longer ends the one it replaces (migration 4's trigger goes). A state
// holds at a checkpoint when it is its task's newest row from at or
// before the checkpoint, and nothing ended it by then; the current state
// is the task's newest row, when nothing ended it. until stays for the
// tasks dropped (and, on a takeover, the states written again): a write
// ends those, as before. The trigger's update of the replaced row cost
// 5 % of the instructions of a three-task run on SQLite; the reads find a
// task's newer row by the primary key. Rows the trigger ended read the
// same either way: their replacement is newer. A binary from before it,
// still running beside the new one, would write states nothing ends and
// read them all as current: it must stop first (docs/operations.md,
// Upgrades).
const (
	replacedSQLite   = `DROP TRIGGER workflow_task_history_close;`
	replacedPostgres = `
DROP TRIGGER workflow_task_history_close ON workflow_task_history;
DROP FUNCTION workflow_task_history_close();`
)

// openUntil is the until of a task state no write has ended (since
// migration 8 a state replaced by a newer row stays open: the newer row
// replaces it)
const openUntil = int64(1) << 62

func schema(integer string) string {
	return strings.ReplaceAll(`
CREATE TABLE workflows (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    principal   TEXT NOT NULL,
    status      TEXT NOT NULL,
    state       TEXT NOT NULL,    -- the Workflow document, JSON
    seq         INT NOT NULL,     -- its last event
    commands    INT NOT NULL,     -- commands queued so far
    owner       TEXT NOT NULL,    -- the runner holding it
    lease       INT NOT NULL,     -- fencing token: every claim increments it, every write checks it
    lease_until INT NOT NULL,     -- Unix nanoseconds; 0: released by its owner
    created     INT NOT NULL,
    updated     INT NOT NULL
);
CREATE INDEX workflows_claimable ON workflows (status, lease_until);
CREATE INDEX workflows_by_principal ON workflows (principal, created);
CREATE TABLE workflow_events (
    workflow_id TEXT NOT NULL,
    seq         INT NOT NULL,
    type        TEXT NOT NULL,
    data        TEXT NOT NULL,    -- the Event, JSON
    PRIMARY KEY (workflow_id, seq)
);
CREATE TABLE workflow_checkpoints (
    workflow_id TEXT NOT NULL,
    n           INT NOT NULL,     -- order within the workflow
    id          TEXT NOT NULL,
    layer       INT NOT NULL,
    state       TEXT NOT NULL,    -- the Workflow document when it was saved
    created     INT NOT NULL,
    PRIMARY KEY (workflow_id, n),
    UNIQUE (id)
);
CREATE TABLE workflow_commands (
    workflow_id TEXT NOT NULL,
    seq         INT NOT NULL,
    body        TEXT NOT NULL,    -- the Command, JSON
    status      TEXT NOT NULL,    -- queued | applied | rejected
    reason      TEXT NOT NULL,
    created     INT NOT NULL,
    done        INT NOT NULL,
    PRIMARY KEY (workflow_id, seq)
);`, "INT ", integer+" ")
}

// Command outcomes.
const (
	CommandQueued   = "queued"
	CommandApplied  = "applied"
	CommandRejected = "rejected"
)

// errStale: the workflow's lease moved on (another runner claimed it);
// the write changed nothing.
var errStale = errors.New("workflow: lease lost to another runner")

// errQueued: a command answered directly finds another queued before it;
// nothing was written, and it joins the queue.
var errQueued = errors.New("workflow: a command is queued before this one")

// journal keeps workflows: sqlJournal in SQLite or PostgreSQL,
// memJournal in memory (for an in-memory core: tests, benchmarks).
type journal interface {
	save(ctx context.Context, s *saved) error
	// op is save's write as an op of a store commit; nil when the journal
	// is not in the store (memory).
	op(s *saved) store.Op
	reject(ctx context.Context, id string, lease int64, o outcome, now time.Time) error
	load(ctx context.Context, id string) (row, error)
	// status reads what a waiter checks, without the document: the
	// workflow's principal, status, pause (Workflow.pause) and last event.
	status(ctx context.Context, id string) (head, error)
	claim(ctx context.Context, id, owner string, lease int64, until time.Time) (bool, error)
	renew(ctx context.Context, id string, lease int64, until time.Time) (bool, error)
	release(ctx context.Context, id string, lease int64) error
	claimable(ctx context.Context, now time.Time, limit int) ([]row, error)
	// enqueue queues a command (its pause is cmd.DecisionID, its key
	// cmd.RequestID with the digest of what it asks).
	enqueue(ctx context.Context, id, principal string, cmd Command, digest string, now time.Time) (int64, error)
	nextCommand(ctx context.Context, id string) (int64, Command, bool, error)
	outcome(ctx context.Context, id string, seq int64) (outcome, error)
	// byRequest finds the command queued under an idempotency key: its
	// seq and digest (a workflow of another principal has none).
	byRequest(ctx context.Context, id, principal, key string) (seq int64, digest string, found bool, err error)
	// answeredBy finds the applied command that answered a pause.
	answeredBy(ctx context.Context, id, pause string) (seq int64, typ string, found bool, err error)
	events(ctx context.Context, id string, after int64, limit int) ([]json.RawMessage, []int64, error)
	// heads returns the sequence number of each of the workflows that
	// exists (Workflow.Seq, its last event's), in one read.
	heads(ctx context.Context, ids []string) (map[string]int64, error)
	checkpoints(ctx context.Context, id string) ([]Checkpoint, error)
	// restore reads the workflow as a kept checkpoint saved it.
	restore(ctx context.Context, id, checkpointID string) (*Workflow, error)
	list(ctx context.Context, principal string, limit int) ([]*Workflow, error)
}

// sqlJournal keeps workflows in a SQL store opened with Extension.
type sqlJournal struct {
	st store.Store
	q  store.Querier
	// the INSERTs of a write's event rows and task states
	insertEvents, insertStates *rows
}

// newSQLJournal keeps workflows in st's tables.
func newSQLJournal(st store.Store, q store.Querier) *sqlJournal {
	return &sqlJournal{st: st, q: q, insertStates: stateRows(),
		insertEvents: newRows(`INSERT INTO workflow_events (workflow_id, seq, type, data, cp_n, cp_id, cp_layer, cp_state, cp_created) VALUES `, eventWidth, "")}
}

// head is what a waiter and a command's door read of a workflow.
type head struct {
	principal, status, pause string
	seq                      int64
}

// row is a workflow's stored document with its lease.
type row struct {
	w          *Workflow
	lease      int64
	leaseUntil int64
	// inline: its tasks were read from the document (written before
	// the task rows); the next write writes them all.
	inline bool
}

// saved is one write of a workflow by its owner: the new document, its
// events, a checkpoint, and the command it answers.
type saved struct {
	w      *Workflow
	lease  int64
	events []Event
	// cpTasks is what changed in cp.w.Tasks since the last write (with
	// cp), tasks what changed in w.Tasks since then, or since cp.w.Tasks
	// with cp (diffTasks): the states writeStates records.
	tasks, cpTasks taskDiff
	cp             *Checkpoint
	// prune, with cp, drops the task states only checkpoints beyond
	// KeepCheckpoints held (the runner knows of none: false)
	prune bool
	cmd   *outcome
	// add, with cmd, appends a command to the queue as processed already
	// (cmd is its outcome; the write sets cmd.Seq, from the workflow's
	// update: never with insert); digest is what it asked, for its key
	// (add.RequestID).
	add    *Command
	digest string
	insert bool // the workflow is new
	// sameStatus: the workflow's status is as stored (the write leaves
	// the column, and its index, as they are)
	sameStatus bool
	owner      string
	until      int64
}

// outcome is what became of a queued command.
type outcome struct {
	Seq    int64  `json:"seq"`
	Status string `json:"status"` // applied | rejected (queued while waiting)
	Reason string `json:"reason,omitempty"`
	Code   string `json:"code,omitempty"` // a rejection's error code; "" is invalid_state
	pause  string // the pause an applied command answered
}

// err is a rejected command's error; nil when it was applied.
func (o outcome) err() error {
	if o.Status != CommandRejected {
		return nil
	}
	code := o.Code
	if code == "" {
		code = agentplane.CodeInvalidState
	}
	return agentplane.Errorf(code, "%s", o.Reason)
}

// save writes s in one transaction: the document (checked against the
// lease), the events, the checkpoint with the pruning of older ones, the
// command's outcome.
func (j *sqlJournal) save(ctx context.Context, s *saved) error {
	return j.st.Commit(ctx, &store.Commit{Ops: []store.Op{j.op(s)}})
}

// op is save's write, for a commit of the store (the gate's, with a task's
// result).
func (j *sqlJournal) op(s *saved) store.Op {
	head := *s.w
	head.Tasks = nil // a row each
	doc, err := appendWorkflow(make([]byte, 0, 1024), &head)
	state := string(doc)
	now := s.w.Updated.UnixNano()
	return store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		if err != nil {
			return err
		}
		if s.insert {
			if _, err := tx.Exec(ctx, `INSERT INTO workflows (id, session_id, principal, status, pause, state, seq, commands, owner, lease, lease_until, created, updated)
				VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)`, s.w.ID, s.w.SessionID, s.w.Principal, s.w.Status, s.w.pause(), state, s.w.Seq,
				s.owner, s.lease, s.until, s.w.Created.UnixNano(), now); err != nil {
				return err
			}
		} else {
			// the status only when it changed (its index entry stays as it
			// is otherwise); a command carried out at once takes its number
			// from the workflow's row in the same statement
			set, args := `pause = ?, state = ?, seq = ?, updated = ?`, []any{s.w.pause(), state, s.w.Seq, now, s.w.ID, s.lease}
			if !s.sameStatus {
				set, args = `status = ?, `+set, append([]any{s.w.Status}, args...)
			}
			var n int64
			var err error
			if s.add != nil {
				err = tx.Query(ctx, `UPDATE workflows SET `+set+`, commands = commands + 1 WHERE id = ? AND lease = ? RETURNING commands`, args,
					func(scan func(...any) error) error { n++; return scan(&s.cmd.Seq) })
			} else {
				n, err = tx.Exec(ctx, `UPDATE workflows SET `+set+` WHERE id = ? AND lease = ?`, args...)
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return errStale
			}
		}
		buf := doc[:0] // the rows' JSON, one after another (the document is state)
		evs, buf, err := eventRows(s.w.ID, s.events, buf)
		if err != nil {
			return err
		}
		// the checkpoint in the last row's cp_ columns
		if s.cp != nil {
			if len(evs) == 0 {
				return fmt.Errorf("workflow: %s: checkpoint %s saved without an event", s.w.ID, s.cp.ID)
			}
			cpState := state // a checkpoint of the workflow as written (its last layer's end, a pause): its row's document
			if s.cp.w != s.w {
				kept := *s.cp.w
				kept.Tasks = nil // in workflow_task_history
				cpDoc, err := appendWorkflow(buf[:0], &kept)
				if err != nil {
					return err
				}
				buf, cpState = cpDoc, string(cpDoc)
			}
			last := evs[len(evs)-eventWidth:]
			last[4], last[5], last[6], last[7], last[8] = s.cp.n, s.cp.ID, s.cp.Layer, cpState, s.cp.Created.UnixNano()
		}
		if err := j.insertEvents.insert(ctx, tx, evs); err != nil {
			return err
		}
		if err := j.writeStates(ctx, tx, s, buf); err != nil {
			return err
		}
		if s.add != nil {
			body, err := json.Marshal(s.add)
			if err != nil {
				return err
			}
			// after the row lock (the workflow's update above): a command
			// queued meanwhile goes first, and this one is not inserted
			n, err := tx.Exec(ctx, `INSERT INTO workflow_commands (workflow_id, seq, body, status, reason, code, pause, request_id, request_digest, created, done)
				SELECT ?, CAST(? AS BIGINT), ?, ?, ?, ?, ?, ?, ?, CAST(? AS BIGINT), CAST(? AS BIGINT)
				WHERE NOT EXISTS (SELECT 1 FROM workflow_commands WHERE workflow_id = ? AND status = 'queued')`,
				s.w.ID, s.cmd.Seq, string(body), s.cmd.Status, s.cmd.Reason, s.cmd.Code, s.add.DecisionID, s.add.RequestID, s.digest, now, now, s.w.ID)
			if err != nil {
				return err
			}
			if n == 0 {
				return errQueued
			}
		} else if s.cmd != nil {
			n, err := tx.Exec(ctx, `UPDATE workflow_commands SET status = ?, reason = ?, code = ?, done = ? WHERE workflow_id = ? AND seq = ? AND status = ?`,
				s.cmd.Status, s.cmd.Reason, s.cmd.Code, now, s.w.ID, s.cmd.Seq, CommandQueued)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("workflow: command %d of %s was processed already", s.cmd.Seq, s.w.ID)
			}
		}
		return nil
	})
}

// reject records a command's rejection; the workflow is unchanged.
func (j *sqlJournal) reject(ctx context.Context, id string, lease int64, o outcome, now time.Time) error {
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Exec(ctx, `UPDATE workflow_commands SET status = ?, reason = ?, code = ?, done = ? WHERE workflow_id = ? AND seq = ? AND status = ?
			AND EXISTS (SELECT 1 FROM workflows WHERE id = ? AND lease = ?)`, CommandRejected, o.Reason, o.Code, now.UnixNano(), id, o.Seq, CommandQueued, id, lease)
		if err == nil && n == 0 {
			err = errStale
		}
		return err
	})
	return j.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}})
}

const rowColumns = `state, lease, lease_until`

func scanRow(scan func(...any) error) (row, error) {
	var r row
	var doc string
	if err := scan(&doc, &r.lease, &r.leaseUntil); err != nil {
		return r, err
	}
	w, err := unmarshalWorkflow([]byte(doc))
	r.w, r.inline = w, w != nil && w.Tasks != nil
	return r, err
}

// load reads a workflow with its lease; a workflow that does not exist is
// not_found.
func (j *sqlJournal) load(ctx context.Context, id string) (row, error) {
	var r row
	found := false
	err := j.q.Query(ctx, `SELECT `+rowColumns+` FROM workflows WHERE id = ?`, []any{id}, func(scan func(...any) error) error {
		var err error
		r, err = scanRow(scan)
		found = true
		return err
	})
	if err == nil && !found {
		err = agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
	}
	if err == nil {
		err = j.attachTasks(ctx, []*Workflow{r.w})
	}
	return r, err
}

func (j *sqlJournal) status(ctx context.Context, id string) (head, error) {
	var h head
	found := false
	err := j.q.Query(ctx, `SELECT principal, status, pause, seq FROM workflows WHERE id = ?`, []any{id}, func(scan func(...any) error) error {
		found = true
		return scan(&h.principal, &h.status, &h.pause, &h.seq)
	})
	if err == nil && !found {
		err = agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
	}
	return h, err
}

// claim takes the workflow over from the lease it had: the fencing token
// goes up by one. It reports false when another runner moved it first.
func (j *sqlJournal) claim(ctx context.Context, id, owner string, lease int64, until time.Time) (bool, error) {
	return j.cas(ctx, `UPDATE workflows SET owner = ?, lease = lease + 1, lease_until = ? WHERE id = ? AND lease = ?`,
		owner, until.UnixNano(), id, lease)
}

// renew extends the owner's lease.
func (j *sqlJournal) renew(ctx context.Context, id string, lease int64, until time.Time) (bool, error) {
	return j.cas(ctx, `UPDATE workflows SET lease_until = ? WHERE id = ? AND lease = ?`, until.UnixNano(), id, lease)
}

// release gives the workflow up at once: another runner may claim it
// without waiting for the lease to run out, and knows nothing was in
// flight.
func (j *sqlJournal) release(ctx context.Context, id string, lease int64) error {
	_, err := j.cas(ctx, `UPDATE workflows SET lease_until = 0 WHERE id = ? AND lease = ?`, id, lease)
	return err
}

func (j *sqlJournal) cas(ctx context.Context, query string, args ...any) (bool, error) {
	var n int64
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.Exec(ctx, query, args...)
		return err
	})
	if err := j.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		return false, err
	}
	return n == 1, nil
}

// claimable lists workflows that are not finished and whose lease ran out
// or was released. It names the statuses that are not terminal, not those
// that are: status IN (…) finds them in workflows_claimable, where NOT IN
// read every workflow ever run (SQLite scanned the table on every poll).
func (j *sqlJournal) claimable(ctx context.Context, now time.Time, limit int) ([]row, error) {
	var out []row
	err := j.q.Query(ctx, `SELECT `+rowColumns+` FROM workflows
		WHERE status IN (`+liveStatuses+`) AND lease_until < ?
		ORDER BY lease_until LIMIT ?`,
		[]any{now.UnixNano(), limit}, func(scan func(...any) error) error {
			r, err := scanRow(scan)
			if err == nil {
				out = append(out, r)
			}
			return err
		})
	if err == nil {
		ws := make([]*Workflow, len(out))
		for i, r := range out {
			ws[i] = r.w
		}
		err = j.attachTasks(ctx, ws)
	}
	return out, err
}

// enqueue appends a command to the workflow's queue and returns its
// sequence number. A workflow that is not the principal's is not_found; a
// finished one refuses commands.
func (j *sqlJournal) enqueue(ctx context.Context, id, principal string, cmd Command, digest string, now time.Time) (int64, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return 0, err
	}
	var seq int64
	var status string
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		found := false
		err := tx.Query(ctx, `UPDATE workflows SET commands = commands + 1 WHERE id = ? AND principal = ? RETURNING commands, status`,
			[]any{id, principal}, func(scan func(...any) error) error {
				found = true
				return scan(&seq, &status)
			})
		switch {
		case err != nil:
			return err
		case !found:
			return agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
		case Terminal(status):
			return agentplane.Errorf(agentplane.CodeInvalidState, "workflow %s is %s: it takes no more commands", id, status)
		}
		_, err = tx.Exec(ctx, `INSERT INTO workflow_commands (workflow_id, seq, body, status, reason, pause, request_id, request_digest, created, done)
			VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, 0)`,
			id, seq, string(body), CommandQueued, cmd.DecisionID, cmd.RequestID, digest, now.UnixNano())
		return err
	})
	if err := j.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		return 0, err
	}
	return seq, nil
}

// nextCommand returns the workflow's oldest queued command.
func (j *sqlJournal) nextCommand(ctx context.Context, id string) (int64, Command, bool, error) {
	var seq int64
	var body string
	found := false
	// status spelled out: the planner proves the partial index covers it
	var pause, key string
	err := j.q.Query(ctx, `SELECT seq, body, pause, request_id FROM workflow_commands WHERE workflow_id = ? AND status = 'queued' ORDER BY seq LIMIT 1`,
		[]any{id}, func(scan func(...any) error) error {
			found = true
			return scan(&seq, &body, &pause, &key)
		})
	if err != nil || !found {
		return 0, Command{}, false, err
	}
	var c Command
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		return seq, c, true, fmt.Errorf("workflow: command %d of %s is corrupt: %w", seq, id, err)
	}
	c.DecisionID, c.RequestID = pause, key
	return seq, c, true, nil
}

// outcome reads what became of a command.
func (j *sqlJournal) outcome(ctx context.Context, id string, seq int64) (outcome, error) {
	o := outcome{Seq: seq}
	found := false
	err := j.q.Query(ctx, `SELECT status, reason, code FROM workflow_commands WHERE workflow_id = ? AND seq = ?`, []any{id, seq},
		func(scan func(...any) error) error {
			found = true
			return scan(&o.Status, &o.Reason, &o.Code)
		})
	if err == nil && !found {
		err = agentplane.Errorf(agentplane.CodeNotFound, "workflow %s has no command %d", id, seq)
	}
	return o, err
}

func (j *sqlJournal) byRequest(ctx context.Context, id, principal, key string) (seq int64, digest string, found bool, err error) {
	// request_id <> '' (key never is): the partial index's condition, which
	// a planner cannot infer from request_id = ?
	err = j.q.Query(ctx, `SELECT c.seq, c.request_digest FROM workflow_commands c JOIN workflows w ON w.id = c.workflow_id
		WHERE c.workflow_id = ? AND c.request_id = ? AND c.request_id <> '' AND w.principal = ?`, []any{id, key, principal},
		func(scan func(...any) error) error {
			found = true
			return scan(&seq, &digest)
		})
	return seq, digest, found, err
}

func (j *sqlJournal) answeredBy(ctx context.Context, id, pause string) (seq int64, typ string, found bool, err error) {
	var body string
	// pause <> '' (a decision id never is): workflow_commands_answer's
	// condition, which a planner cannot infer from pause = ?
	err = j.q.Query(ctx, `SELECT seq, body FROM workflow_commands WHERE workflow_id = ? AND pause = ? AND pause <> '' AND status = 'applied'`, []any{id, pause},
		func(scan func(...any) error) error {
			found = true
			return scan(&seq, &body)
		})
	var c Command
	json.Unmarshal([]byte(body), &c)
	return seq, c.Type, found, err
}

// events returns the workflow's events after a sequence number, at most
// limit, as stored.
func (j *sqlJournal) events(ctx context.Context, id string, after int64, limit int) ([]json.RawMessage, []int64, error) {
	var out []json.RawMessage
	var seqs []int64
	// a row holds at least one event: limit rows hold limit events
	nl := []byte{'\n'}
	err := j.q.Query(ctx, `SELECT seq, data FROM workflow_events WHERE workflow_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		[]any{id, after, limit}, func(scan func(...any) error) error {
			var last int64
			var data []byte
			if err := scan(&last, &data); err != nil {
				return err
			}
			seq := last - int64(bytes.Count(data, nl))
			for ev := range bytes.SplitSeq(data, nl) {
				if seq > after && len(out) < limit {
					out, seqs = append(out, json.RawMessage(ev)), append(seqs, seq)
				}
				seq++
			}
			return nil
		})
	return out, seqs, err
}

// eventRows encodes events as rows of workflow_events (eventWidth values a row,
// buf the room to encode in): a run of consecutive events is one row,
// their JSON one per line — no event's JSON holds a raw newline: strings
// are escaped and raw JSON compacted — keyed by its last event's seq and
// typed by its first's. A commit's events are one such run: one row a
// commit, where a row an event cost a B-tree entry, twice (the table and
// its key), and four values to bind, each.
func eventRows(id string, events []Event, buf []byte) ([]any, []byte, error) {
	var rows []any
	start := 0
	for i := range events {
		if i > start && events[i].Seq != events[i-1].Seq+1 {
			rows = append(rows, id, events[i-1].Seq, events[start].Type, string(buf), 0, "", 0, "", 0)
			buf, start = buf[:0], i
		}
		if i > start {
			buf = append(buf, '\n')
		}
		var err error
		if buf, err = appendEvent(buf, &events[i]); err != nil {
			return nil, buf, err
		}
	}
	if len(events) > start {
		rows = append(rows, id, events[len(events)-1].Seq, events[start].Type, string(buf), 0, "", 0, "", 0)
	}
	return rows, buf, nil
}

// eventWidth is the values of a row of workflow_events: the workflow,
// seq, type, data, and the checkpoint's n, id, layer, document and time
// (0 and "" without one).
const eventWidth = 9

func (j *sqlJournal) heads(ctx context.Context, ids []string) (map[string]int64, error) {
	out := map[string]int64{}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 100)]
		ids = ids[len(batch):]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		// the row's seq, its last event's (written with the events): a
		// probe of the key per workflow, where MAX(seq) of its events read
		// every event it ever wrote, per poll
		err := j.q.Query(ctx, `SELECT id, seq FROM workflows WHERE id IN (`+store.Params(len(batch))+`)`, args,
			func(scan func(...any) error) error {
				var id string
				var seq int64
				err := scan(&id, &seq)
				out[id] = seq
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keptCheckpoints selects the rows of a workflow's kept checkpoints, its
// newest (its arguments: the workflow's id, KeepCheckpoints): the
// workflow's rows walked back from its last, by their key.
const keptCheckpoints = `(SELECT cp_n, cp_id, cp_layer, cp_state, cp_created FROM workflow_events WHERE workflow_id = ? AND cp_n > 0 ORDER BY seq DESC LIMIT ?) AS kept`

// checkpoints lists the workflow's checkpoints, oldest first.
func (j *sqlJournal) checkpoints(ctx context.Context, id string) ([]Checkpoint, error) {
	var out []Checkpoint
	err := j.q.Query(ctx, `SELECT cp_id, cp_layer, cp_created, cp_n FROM `+keptCheckpoints+` ORDER BY cp_n`, []any{id, KeepCheckpoints},
		func(scan func(...any) error) error {
			var c Checkpoint
			var created int64
			if err := scan(&c.ID, &c.Layer, &created, &c.n); err != nil {
				return err
			}
			c.Created = time.Unix(0, created).UTC()
			out = append(out, c)
			return nil
		})
	return out, err
}

// list returns a principal's workflows, newest first.
func (j *sqlJournal) list(ctx context.Context, principal string, limit int) ([]*Workflow, error) {
	var out []*Workflow
	err := j.q.Query(ctx, `SELECT state FROM workflows WHERE principal = ? ORDER BY created DESC, id DESC LIMIT ?`, []any{principal, limit},
		func(scan func(...any) error) error {
			var doc string
			if err := scan(&doc); err != nil {
				return err
			}
			w, err := unmarshalWorkflow([]byte(doc))
			if err == nil {
				out = append(out, w)
			}
			return err
		})
	if err == nil {
		err = j.attachTasks(ctx, out)
	}
	return out, err
}
