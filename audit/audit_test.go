package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
)

func sample(session string, i int) *Record {
	return &Record{
		Session: session, Kind: KindTurn, Time: time.Date(2026, 11, 25, 12, 0, i, 0, time.UTC),
		Input:    &agentplane.TurnInput{Text: "switch to ddr mode"},
		Decision: &agentplane.Decision{Action: agentplane.ActionInvokeCommand, CommandID: "set_mode", ResolvedID: "ddr", Trace: []string{"t"}},
		Result:   &agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: "Mode: DDR.", StateDiff: []agentplane.PatchOp{}},
	}
}

// logs runs a test against every Log implementation.
func logs(t *testing.T, fn func(t *testing.T, l Log)) {
	t.Run("Memory", func(t *testing.T) { fn(t, NewMemory()) })
	t.Run("File", func(t *testing.T) {
		f, err := OpenFile(filepath.Join(t.TempDir(), "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fn(t, f)
	})
}

func TestAppendChainsPerSession(t *testing.T) {
	logs(t, func(t *testing.T, l Log) {
		ctx := context.Background()
		for i := 0; i < 3; i++ {
			for _, s := range []string{"a", "b"} {
				if err := l.Append(ctx, sample(s, i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, s := range []string{"a", "b"} {
			recs, err := l.Records(ctx, s)
			if err != nil || len(recs) != 3 {
				t.Fatalf("%s: %d records, %v", s, len(recs), err)
			}
			if err := Verify(recs); err != nil {
				t.Fatal(err)
			}
			if recs[0].Prev != "" || recs[1].Prev != recs[0].Hash || recs[2].Seq != 3 {
				t.Fatalf("chain fields: %+v", recs)
			}
		}
	})
}

func TestVerifyDetectsTampering(t *testing.T) {
	l := NewMemory()
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		l.Append(ctx, sample("s", i))
	}
	good, _ := l.Records(ctx, "s")
	tests := []struct {
		name   string
		mutate func([]Record) []Record
		want   string
	}{
		{"Edited", func(r []Record) []Record { r[1].Decision.ResolvedID = "sales"; return r }, "record 2 (seq 2): hash mismatch"},
		{"EditedTrace", func(r []Record) []Record { r[2].Decision.Trace = []string{"forged"}; return r }, "record 3 (seq 3): hash mismatch"},
		{"Dropped", func(r []Record) []Record { return append(r[:1], r[2:]...) }, "record 2 (seq 3): sequence number 3 where 2"},
		{"Reordered", func(r []Record) []Record { r[1], r[2] = r[2], r[1]; return r }, "record 2 (seq 3)"},
		{"Rehashed", func(r []Record) []Record {
			r[1].Decision.ResolvedID = "sales"
			r[1].Hash, _ = r[1].ComputeHash() // a forger who recomputes one hash breaks the next link
			return r
		}, "record 3 (seq 3): does not follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := cloneRecords(good)
			err := Verify(tt.mutate(recs))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify = %v, want %q", err, tt.want)
			}
		})
	}
}

func cloneRecords(in []Record) []Record {
	out := make([]Record, len(in))
	for i, r := range in {
		d := *r.Decision
		d.Trace = append([]string(nil), d.Trace...)
		r.Decision = &d
		out[i] = r
	}
	return out
}

func TestFileReopenAndVerifyJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	ctx := context.Background()
	f, _ := OpenFile(path)
	f.Append(ctx, sample("a", 0))
	f.Append(ctx, sample("b", 0))
	f.Close()
	f, err := OpenFile(path) // a restart continues the chains
	if err != nil {
		t.Fatal(err)
	}
	f.Append(ctx, sample("a", 1))
	f.Close()
	data, _ := os.ReadFile(path)
	sum, err := VerifyJSONL(bytes.NewReader(data))
	if err != nil || sum.Sessions != 2 || sum.Records != 3 {
		t.Fatalf("VerifyJSONL = %+v, %v", sum, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	edited := strings.Replace(lines[2], `"ddr"`, `"sales"`, 1)
	_, err = VerifyJSONL(strings.NewReader(lines[0] + "\n" + lines[1] + "\n" + edited + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3: session a, seq 2: hash mismatch") {
		t.Fatalf("edited line: %v", err)
	}
	_, err = VerifyJSONL(strings.NewReader(lines[1] + "\n" + lines[2] + "\n")) // a#1 dropped
	if err == nil || !strings.Contains(err.Error(), "line 2: session a, seq 2") {
		t.Fatalf("dropped line: %v", err)
	}
	_, err = VerifyJSONL(strings.NewReader(lines[0] + "\nnot json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: not an audit record") {
		t.Fatalf("garbage line: %v", err)
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "no", "such", "dir.jsonl")); err == nil {
		t.Fatal("opened a file in a missing directory")
	}
}

func FuzzVerifyJSONL(f *testing.F) {
	l := NewMemory()
	l.Append(context.Background(), sample("s", 0))
	recs, _ := l.Records(context.Background(), "s")
	var buf bytes.Buffer
	b, _ := jsonMarshal(recs[0])
	buf.Write(b)
	f.Add(buf.Bytes())
	f.Add([]byte("{}\n{\"session\":\"x\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		VerifyJSONL(bytes.NewReader(data)) // must not panic
	})
}

func jsonMarshal(r Record) ([]byte, error) { return json.Marshal(r) }

// rowsOf is Rows over strings.
type rowsOf struct {
	rows []string
	i    int
}

func (r *rowsOf) Next() bool { r.i++; return r.i <= len(r.rows) }
func (r *rowsOf) Scan(dest ...any) error {
	*dest[0].(*string) = r.rows[r.i-1]
	return nil
}
func (r *rowsOf) Err() error { return nil }

func TestDecodeRows(t *testing.T) {
	recs, err := DecodeRows(&rowsOf{rows: []string{`{"session":"a","seq":1}`, `{"session":"a","seq":2}`}})
	if err != nil || len(recs) != 2 || recs[1].Seq != 2 {
		t.Fatalf("%+v, %v", recs, err)
	}
	if _, err := DecodeRows(&rowsOf{rows: []string{`{"session":"a","seq":1}`, `{not json`}}); err == nil || !strings.Contains(err.Error(), "record 2 is corrupt") {
		t.Fatalf("corrupt row: %v", err)
	}
}
