package workflow

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
)

// appendEvent writes every event byte for byte as json.Marshal does:
// each field set and unset, strings that need escaping (HTML's
// characters, controls, what is not ASCII, invalid UTF-8), raw JSON with
// whitespace and HTML's characters, a nil argument list.
func TestAppendEventIsJSONMarshal(t *testing.T) {
	approved := true
	at := time.Date(2026, 11, 27, 21, 5, 0, 123456789, time.UTC)
	events := []Event{
		{},
		{Seq: 1, Type: EventStarted, WorkflowID: "wf_1", Time: at},
		{Seq: 2, Type: EventTaskCompleted, WorkflowID: "wf_1", Time: at.In(time.FixedZone("x", 3600)), Layer: 2, Task: "a", Tool: "noop", Attempts: 3,
			Output: json.RawMessage(" { \"a\" : [1, 2.50, \"<b>&\u2028\"] ,\n\"b\":null}\t"), Status: StatusRunning},
		{Seq: 3, Type: EventTaskFailed, Error: &agentplane.ResultError{Code: "tool_failed", Detail: "it <failed> & \"said\" \x01 é \xff"}},
		{Seq: 4, Type: EventLayerStarted, Tasks: []TaskCall{{ID: "a", Tool: "t", Args: json.RawMessage(`{"x": "y"}`), Impact: "read"}, {ID: "b\n", Tool: "t"}}},
		{Seq: 5, Type: EventLayerComplete, Results: []TaskResult{{ID: "a", Tool: "t", Status: TaskCompleted, Output: json.RawMessage(`{}`)},
			{ID: "b", Tool: "t", Status: TaskFailed, Error: &agentplane.ResultError{Code: "x"}}}},
		{Seq: 6, Type: EventDecisionRequired, CheckpointID: "c1", DecisionID: "d_1", Options: []string{"continue", "abort"}, Reason: "why ☃"},
		{Seq: 7, Type: EventResumed, Command: &Command{Type: CommandApprovalResponse, CheckpointID: "a1", Approved: &approved, RequestID: "k"}},
		{Seq: -8, Layer: -1, Attempts: -2, Time: time.Unix(0, 0)},
	}
	for i, ev := range events {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEvent([]byte("prefix"), &ev)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("event %d:\n got %s\nwant %s", i, got[len("prefix"):], want)
		}
	}
	// what json.Marshal refuses, appendEvent refuses
	for i, ev := range []Event{{Output: json.RawMessage(`{"a":`)}, {Tasks: []TaskCall{{Args: json.RawMessage(`nope`)}}}, {Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		if _, err := json.Marshal(ev); err == nil {
			t.Fatalf("bad event %d: json.Marshal took it", i)
		}
		if b, err := appendEvent(nil, &ev); err == nil {
			t.Errorf("bad event %d: appendEvent wrote %s", i, b)
		}
	}
}

// appendTaskRun writes every task state byte for byte as json.Marshal
// does.
func TestAppendTaskRunIsJSONMarshal(t *testing.T) {
	tasks := []TaskRun{
		{},
		{Task: Task{ID: "a", Tool: "noop"}, Status: TaskPending, Key: "wf_1-a"},
		{Task: Task{ID: "b<", Tool: "send", Args: map[string]any{"z": 1, "a": []any{"x", nil, true}, "m": map[string]any{"<": "&"}}, DependsOn: []string{"a", "c\u00e9"}},
			Status: TaskRunning, Layer: 2, Attempts: 3, RequestID: "wf_1-b-3", Key: "wf_1-b", Resolved: json.RawMessage(` {"z": 1} `),
			Output: json.RawMessage(`{"out":"<ok>"}`), Error: &agentplane.ResultError{Code: "timeout", Detail: "slow \x7f"}, Added: "replan_dag", Approval: "a1", n: 7},
		{Task: Task{ID: "c", Args: map[string]any{}, DependsOn: []string{}}, Layer: -1, Attempts: -1},
	}
	for i, task := range tasks {
		want, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendTaskRun(nil, &task)
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("task %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if b, err := appendTaskRun(nil, &TaskRun{Output: json.RawMessage(`{`)}); err == nil {
		t.Errorf("a task with broken output: appendTaskRun wrote %s", b)
	}
}

// appendWorkflow writes every workflow document byte for byte as
// json.Marshal does: with and without its tasks, each pause, strings
// that need escaping.
func TestAppendWorkflowIsJSONMarshal(t *testing.T) {
	at := time.Date(2026, 11, 27, 21, 5, 0, 123456789, time.UTC)
	ws := []Workflow{
		{},
		{ID: "wf_1", SessionID: "s", Principal: "alice", Status: StatusRunning, ResumePolicy: ResumeManual, MaxAttempts: 3, Layer: 1, Seq: 4, Counter: 2,
			Created: at, Updated: at.Add(time.Millisecond)},
		{ID: "wf_2", Name: "n <&>", SessionID: "s", Principal: "bob é", Roles: []string{"admin", "x\n"}, Status: StatusAwaitingApproval, PerLayerValidation: true,
			Tasks:    []TaskRun{{Task: Task{ID: "a", Tool: "send"}, Status: TaskPending, Key: "wf_2-a"}, {Task: Task{ID: "b", Tool: "t", DependsOn: []string{"a"}}, Status: TaskCompleted, Output: json.RawMessage(`{"ok": true}`)}},
			Approval: &Approval{ID: "d_1", CheckpointID: "wf_2-a1", Layer: 2, Tasks: []TaskCall{{ID: "a", Tool: "send", Args: json.RawMessage(`{}`), Impact: "external"}}},
			Dropped:  []string{"c_r1", "d\"e"}, Reason: "why", RequestDigest: "abc", Created: at.In(time.FixedZone("x", -3600)), Updated: at},
		{ID: "wf_3", Status: StatusAwaitingDecision, Tasks: []TaskRun{}, Approval: &Approval{},
			Decision: &DecisionRequest{ID: "d_2", Layer: 1, Options: []string{CommandContinue, CommandAbort}}},
		{ID: "wf_4", Status: StatusInterrupted, Roles: []string{},
			Interruption: &Interruption{ID: "d_3", CheckpointID: "wf_4-c1", Checkpoints: []string{"wf_4-c1"}, InFlight: []string{"a"}}},
	}
	for i, w := range ws {
		want, err := json.Marshal(&w)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendWorkflow([]byte("prefix"), &w)
		if err != nil {
			t.Fatalf("workflow %d: %v", i, err)
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("workflow %d:\n got %s\nwant %s", i, got[len("prefix"):], want)
		}
	}
	for i, w := range []Workflow{{Created: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, {Tasks: []TaskRun{{Output: json.RawMessage(`{`)}}},
		{Approval: &Approval{Tasks: []TaskCall{{Args: json.RawMessage(`nope`)}}}}} {
		if _, err := json.Marshal(&w); err == nil {
			t.Fatalf("bad workflow %d: json.Marshal took it", i)
		}
		if b, err := appendWorkflow(nil, &w); err == nil {
			t.Errorf("bad workflow %d: appendWorkflow wrote %s", i, b)
		}
	}
}

// newTaskID names a replanned task with an id no task of the workflow has
// had: not one it has, nor one a rollback dropped (spent).
func TestNewTaskIDSkipsSpentIDs(t *testing.T) {
	w := &Workflow{Tasks: []TaskRun{{Task: Task{ID: "send_r1"}}}, Dropped: []string{"send_r2", "other_r1"}}
	if id := newTaskID(w, "send"); id != "send_r3" {
		t.Fatalf("newTaskID = %q; want send_r3", id)
	}
	if id := newTaskID(w, "look"); id != "look_r1" {
		t.Fatalf("newTaskID = %q; want look_r1", id)
	}
}
