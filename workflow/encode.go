package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/canonjson"
)

// Events are encoded as encoding/json would, byte for byte (the tests
// hold the two side by side), without its reflection: a run writes a
// dozen and more, each of them once, on the store's writer, where
// json.Marshal took about a sixth of the engine's own instructions. What
// is rare in an event (an error, a command, a decision's options) still
// goes through json.Marshal.

// appendEvent appends ev's JSON.
func appendEvent(b []byte, ev *Event) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = appendField(b, "type", ev.Type)
	b = appendField(b, "workflow_id", ev.WorkflowID)
	b = append(b, `,"time":`...)
	b, err := appendTime(b, ev.Time)
	if err != nil {
		return nil, err
	}
	if ev.Layer != 0 {
		b = append(b, `,"layer":`...)
		b = strconv.AppendInt(b, int64(ev.Layer), 10)
	}
	b = appendOmitEmpty(b, "task", ev.Task)
	b = appendOmitEmpty(b, "tool", ev.Tool)
	if ev.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(ev.Attempts), 10)
	}
	if len(ev.Output) > 0 {
		b = append(b, `,"output":`...)
		if b, err = appendRaw(b, ev.Output); err != nil {
			return nil, err
		}
	}
	if ev.Error != nil {
		if b, err = appendMarshal(b, "error", ev.Error); err != nil {
			return nil, err
		}
	}
	if len(ev.Tasks) > 0 {
		b = append(b, `,"tasks":[`...)
		for i := range ev.Tasks {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendTaskCall(b, &ev.Tasks[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if len(ev.Results) > 0 {
		b = append(b, `,"results":[`...)
		for i := range ev.Results {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendTaskResult(b, &ev.Results[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendOmitEmpty(b, "checkpoint_id", ev.CheckpointID)
	b = appendOmitEmpty(b, "decision_id", ev.DecisionID)
	if len(ev.Options) > 0 {
		if b, err = appendMarshal(b, "options", ev.Options); err != nil {
			return nil, err
		}
	}
	b = appendOmitEmpty(b, "reason", ev.Reason)
	if ev.Command != nil {
		if b, err = appendMarshal(b, "command", ev.Command); err != nil {
			return nil, err
		}
	}
	b = appendOmitEmpty(b, "status", ev.Status)
	return append(b, '}'), nil
}

func appendTaskCall(b []byte, c *TaskCall) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, c.ID)
	b = appendField(b, "tool", c.Tool)
	b = append(b, `,"args":`...)
	var err error
	if c.Args == nil {
		b = append(b, "null"...)
	} else if b, err = appendRaw(b, c.Args); err != nil {
		return nil, err
	}
	b = appendField(b, "impact", c.Impact)
	return append(b, '}'), nil
}

func appendTaskResult(b []byte, r *TaskResult) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = appendField(b, "tool", r.Tool)
	b = appendField(b, "status", r.Status)
	var err error
	if len(r.Output) > 0 {
		b = append(b, `,"output":`...)
		if b, err = appendRaw(b, r.Output); err != nil {
			return nil, err
		}
	}
	if r.Error != nil {
		if b, err = appendMarshal(b, "error", r.Error); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendField appends ,"name":value.
func appendField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendOmitEmpty appends ,"name":value unless value is "".
func appendOmitEmpty(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	return appendField(b, name, value)
}

// appendMarshal appends ,"name": and v as json.Marshal writes it.
func appendMarshal(b []byte, name string, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return append(b, j...), nil
}

// appendString appends s as a JSON string as encoding/json writes it:
// plain printable ASCII as it is, anything else (escapes, HTML's <, >
// and &, and what is not ASCII) through json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plain[s[i]] {
			j, _ := json.Marshal(s) // a string always encodes
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plain is the bytes encoding/json writes as they are in a string:
// printable ASCII but for ", \ and HTML's <, > and &.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendTime appends t as time.Time's MarshalJSON writes it.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		j, err := json.Marshal(t) // its error, as json.Marshal gives it
		return append(b, j...), err
	}
	b = append(b, '"')
	b = canonjson.AppendTime(b, t)
	return append(b, '"'), nil
}

// appendRaw appends raw JSON as encoding/json writes a json.RawMessage:
// checked, compacted, and with HTML's <, > and & (and U+2028, U+2029)
// escaped.
func appendRaw(b []byte, raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("json: error calling MarshalJSON for type json.RawMessage: %w", err)
	}
	out := buf.Bytes()
	if bytes.ContainsAny(out, "<>&\u2028\u2029") {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, out)
		out = esc.Bytes()
	}
	return append(b, out...), nil
}

// appendTaskRun appends a task's state (a row of workflow_task_history)
// as json.Marshal writes it.
func appendTaskRun(b []byte, t *TaskRun) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, t.ID)
	b = appendField(b, "tool", t.Tool)
	var err error
	if len(t.Args) > 0 {
		if b, err = appendMarshal(b, "args", t.Args); err != nil {
			return nil, err
		}
	}
	b = appendStrings(b, "depends_on", t.DependsOn)
	b = appendField(b, "status", t.Status)
	if t.Layer != 0 {
		b = append(b, `,"layer":`...)
		b = strconv.AppendInt(b, int64(t.Layer), 10)
	}
	if t.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(t.Attempts), 10)
	}
	b = appendOmitEmpty(b, "request_id", t.RequestID)
	b = appendOmitEmpty(b, "idempotency_key", t.Key)
	if len(t.Resolved) > 0 {
		b = append(b, `,"resolved_args":`...)
		if b, err = appendRaw(b, t.Resolved); err != nil {
			return nil, err
		}
	}
	if len(t.Output) > 0 {
		b = append(b, `,"output":`...)
		if b, err = appendRaw(b, t.Output); err != nil {
			return nil, err
		}
	}
	if t.Error != nil {
		if b, err = appendMarshal(b, "error", t.Error); err != nil {
			return nil, err
		}
	}
	b = appendOmitEmpty(b, "added", t.Added)
	b = appendOmitEmpty(b, "approval", t.Approval)
	return append(b, '}'), nil
}

// appendStrings appends ,"name":[...] for a list of strings that is
// omitted when empty (omitempty).
func appendStrings(b []byte, name string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendWorkflow appends a workflow's document (a row of workflows, and a
// checkpoint's) as json.Marshal writes it. What is rare in it (a
// decision, an interruption) still goes through json.Marshal.
func appendWorkflow(b []byte, w *Workflow) ([]byte, error) {
	b = append(b, `{"workflow_id":`...)
	b = appendString(b, w.ID)
	b = appendOmitEmpty(b, "name", w.Name)
	b = appendField(b, "session_id", w.SessionID)
	b = appendField(b, "principal", w.Principal)
	b = appendStrings(b, "roles", w.Roles)
	b = appendField(b, "status", w.Status)
	b = append(b, `,"per_layer_validation":`...)
	b = strconv.AppendBool(b, w.PerLayerValidation)
	b = appendField(b, "resume_policy", w.ResumePolicy)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(w.MaxAttempts), 10)
	b = append(b, `,"layer":`...)
	b = strconv.AppendInt(b, int64(w.Layer), 10)
	b = append(b, `,"tasks":`...)
	var err error
	if w.Tasks == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range w.Tasks {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendTaskRun(b, &w.Tasks[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendStrings(b, "dropped_tasks", w.Dropped)
	if a := w.Approval; a != nil {
		b = append(b, `,"approval":{"decision_id":`...)
		b = appendString(b, a.ID)
		b = appendField(b, "checkpoint_id", a.CheckpointID)
		b = append(b, `,"layer":`...)
		b = strconv.AppendInt(b, int64(a.Layer), 10)
		b = append(b, `,"tasks":`...)
		if a.Tasks == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range a.Tasks {
				if i > 0 {
					b = append(b, ',')
				}
				if b, err = appendTaskCall(b, &a.Tasks[i]); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if w.Decision != nil {
		if b, err = appendMarshal(b, "decision", w.Decision); err != nil {
			return nil, err
		}
	}
	if w.Interruption != nil {
		if b, err = appendMarshal(b, "interruption", w.Interruption); err != nil {
			return nil, err
		}
	}
	b = appendOmitEmpty(b, "reason", w.Reason)
	b = appendOmitEmpty(b, "request_digest", w.RequestDigest)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, w.Seq, 10)
	b = append(b, `,"counter":`...)
	b = strconv.AppendInt(b, int64(w.Counter), 10)
	b = append(b, `,"created":`...)
	if b, err = appendTime(b, w.Created); err != nil {
		return nil, err
	}
	b = append(b, `,"updated":`...)
	if b, err = appendTime(b, w.Updated); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}
