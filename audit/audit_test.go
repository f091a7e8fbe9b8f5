package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
)

func sample(session string, i int) *Record {
	return &Record{
		Session: session, Kind: KindTurn, Time: time.Date(2026, 11, 25, 12, 0, i, 0, time.UTC),
		Input:    &agentplane.TurnInput{Text: "switch to <ddr> mode & more"},
		Decision: &agentplane.Decision{Action: agentplane.ActionInvokeCommand, CommandID: "set_mode", ResolvedID: "ddr", Trace: []string{"t"}},
		Result:   &agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: "Mode: DDR.", StateDiff: []agentplane.PatchOp{}},
	}
}

// sealed returns n records of one session chained as a store seals them.
func sealed(t testing.TB, session string, n int) []Record {
	t.Helper()
	var out []Record
	var seq int64
	var prev string
	for i := 0; i < n; i++ {
		r := sample(session, i)
		if err := Seal(r, seq, prev); err != nil {
			t.Fatal(err)
		}
		seq, prev = r.Seq, r.Hash
		out = append(out, *r)
	}
	return out
}

// reread decodes the records' stored bytes again, as a reader of the
// store or the file would.
func reread(t *testing.T, recs []Record) []Record {
	t.Helper()
	out := make([]Record, len(recs))
	for i, r := range recs {
		var err error
		if out[i], err = Decode(r.Raw); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	return out
}

func TestSealIsCanonical(t *testing.T) {
	t.Parallel()
	recs := sealed(t, "s", 2)
	if err := Verify(reread(t, recs)); err != nil {
		t.Fatal(err)
	}
	r := recs[1]
	if r.V != Version || r.Seq != 2 || r.Prev != recs[0].Hash {
		t.Fatalf("chain fields: %+v", r)
	}
	body := bytes.TrimSuffix(bytes.Clone(r.Raw), []byte(`,"hash":"`+r.Hash+`"}`))
	body = append(body, '}')
	canon, err := canonjson.Append(nil, body, nil)
	if err != nil || !bytes.Equal(canon, body) {
		t.Fatalf("the stored bytes before the hash are not canonical:\n%s\n%s", body, canon)
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != r.Hash {
		t.Fatal("the hash is not SHA-256 of the canonical bytes")
	}
	if !bytes.Contains(r.Raw, []byte(`<ddr> mode & more`)) {
		t.Fatalf("canonical JSON does not escape HTML: %s", r.Raw)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	good := sealed(t, "s", 4)
	edit := func(i int, old, new string) func([]Record) []Record {
		return func(r []Record) []Record {
			r[i].Raw = bytes.Replace(r[i].Raw, []byte(old), []byte(new), 1)
			return r
		}
	}
	tests := []struct {
		name   string
		mutate func([]Record) []Record
		want   string
	}{
		{"Edited", edit(1, `"resolved_id":"ddr"`, `"resolved_id":"sales"`), "record 2 (seq 2): hash mismatch"},
		{"EditedTrace", edit(2, `"trace":["t"]`, `"trace":["forged"]`), "record 3 (seq 3): hash mismatch"},
		// a second member in other letter case: Go's decoder and jq
		// would show different values
		{"CaseForged", edit(1, `"text":`, `"Text":"forged","text":`), "differ only in letter case"},
		{"Duplicated", edit(1, `"text":`, `"text":"forged","text":`), "duplicate member name"},
		{"ExtraMember", edit(1, `"kind":`, `"extra":1,"kind":`), "hash mismatch"},
		{"Dropped", func(r []Record) []Record { return append(r[:1], r[2:]...) }, "record 2 (seq 3): sequence number 3 where 2"},
		{"Reordered", func(r []Record) []Record { r[1], r[2] = r[2], r[1]; return r }, "record 2 (seq 3)"},
		{"Rehashed", func(r []Record) []Record {
			// a forger who reseals one record breaks the next link
			f := r[1]
			f.Decision.ResolvedID = "sales"
			if err := Seal(&f, 1, r[0].Hash); err != nil {
				t.Fatal(err)
			}
			r[1] = f
			return r
		}, "record 3 (seq 3): does not follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := tt.mutate(cloneRecords(good))
			var err error
			for i := range recs {
				var d Record
				if d, err = Decode(recs[i].Raw); err != nil {
					err = fmt.Errorf("record %d: %w", i+1, err)
					break
				}
				recs[i] = d
			}
			if err == nil {
				err = Verify(recs)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func cloneRecords(in []Record) []Record {
	out := make([]Record, len(in))
	for i, r := range in {
		d := *r.Decision
		r.Decision = &d
		r.Raw = bytes.Clone(r.Raw)
		out[i] = r
	}
	return out
}

// TestNewFieldsKeepOldHashes: a record written by a later version with a
// member this one does not know still verifies, because hashes are over
// stored bytes, not over what a Go type re-encodes.
func TestNewFieldsKeepOldHashes(t *testing.T) {
	t.Parallel()
	r := sample("s", 0)
	if err := Seal(r, 0, ""); err != nil {
		t.Fatal(err)
	}
	body := bytes.TrimSuffix(bytes.Clone(r.Raw), []byte(`,"hash":"`+r.Hash+`"}`))
	body = append(body, `,"zz_future":{"a":[1,2]}}`...)
	sum := sha256.Sum256(body)
	future := append(body[:len(body)-1], `,"hash":"`+hex.EncodeToString(sum[:])+`"}`...)
	d, err := Decode(future)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify([]Record{d}); err != nil {
		t.Fatalf("a record with an unknown member: %v", err)
	}
	newer := bytes.Replace(r.Raw, []byte(`"v":1`), []byte(`"v":2`), 1)
	if d, err = Decode(newer); err == nil {
		err = Verify([]Record{d})
	}
	if err == nil || !strings.Contains(err.Error(), "newer than this agentplane") {
		t.Fatalf("a newer format: %v", err)
	}
}

// TestGoldenFirstFormat: a log written by agentplane before records were
// versioned (terminal chat, LLM and API executions, a confirmation, two
// sessions) must verify forever.
func TestGoldenFirstFormat(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/v0.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := VerifyJSONL(bytes.NewReader(data))
	if err != nil || sum.Sessions != 2 || sum.Records != 18 {
		t.Fatalf("%+v, %v", sum, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	forged := strings.Replace(lines[1], `"text":"I want`, `"Text":"forged","text":"I want`, 1)
	if _, err := VerifyJSONL(strings.NewReader(lines[0] + "\n" + forged + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a case-forged member in a first-format record: %v", err)
	}
	edited := strings.Replace(lines[1], `"I want to work`, `"I want to wreck`, 1)
	if _, err := VerifyJSONL(strings.NewReader(lines[0] + "\n" + edited + "\n")); err == nil || !strings.Contains(err.Error(), "line 2: session") {
		t.Fatalf("an edited first-format record: %v", err)
	}
}

func TestFileWriteExportAndVerifyJSONL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, b := sealed(t, "a", 3), sealed(t, "b", 1)
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(a[0], b[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(a[2]); err == nil || !strings.Contains(err.Error(), "does not continue the chain") {
		t.Fatalf("a gap: %v", err)
	}
	f.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	f, err = OpenFile(path) // a restart continues the chains
	if err != nil {
		t.Fatal(err)
	}
	store := func(recs []Record) func(context.Context, int64) ([]Record, error) {
		return func(_ context.Context, after int64) ([]Record, error) {
			var out []Record
			for _, r := range recs {
				if r.Seq > after {
					out = append(out, r)
				}
			}
			return out, nil
		}
	}
	if err := f.Export(context.Background(), "a", store(a)); err != nil {
		t.Fatal(err)
	}
	if f.Last("a") != 3 {
		t.Fatalf("exported up to %d", f.Last("a"))
	}
	if err := f.Export(context.Background(), "a", store(sealed(t, "a", 4))); err != nil {
		t.Fatalf("an export with nothing new: %v", err) // the same chain, one more record
	}
	if err := f.Export(context.Background(), "b", store(a)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("another store's chain: %v", err)
	}
	f.Close()
	data, _ := os.ReadFile(path)
	sum, err := VerifyJSONL(bytes.NewReader(data))
	if err != nil || sum.Sessions != 2 || sum.Records != 5 {
		t.Fatalf("VerifyJSONL = %+v, %v", sum, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	_, err = VerifyJSONL(strings.NewReader(lines[0] + "\nnot json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: not an audit record") {
		t.Fatalf("garbage line: %v", err)
	}
	long := lines[0] + "\n" + lines[1] + "\n" + strings.Repeat("x", MaxLine+1) + "\n"
	if _, err := VerifyJSONL(strings.NewReader(long)); err == nil || !strings.Contains(err.Error(), "line 3: longer than") {
		t.Fatalf("an over-long line: %v", err)
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "no", "such", "dir.jsonl")); err == nil {
		t.Fatal("opened a file in a missing directory")
	}
}

func FuzzVerifyJSONL(f *testing.F) {
	recs := sealed(f, "s", 2)
	f.Add(append(append(recs[0].Raw, '\n'), recs[1].Raw...))
	golden, _ := os.ReadFile("testdata/v0.jsonl")
	f.Add(golden[:min(len(golden), 4000)])
	f.Add([]byte("{}\n{\"session\":\"x\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		VerifyJSONL(bytes.NewReader(data)) // must not panic
	})
}

// rowsOf is Rows over strings.
type rowsOf struct {
	rows []string
	i    int
}

func (r *rowsOf) Next() bool { r.i++; return r.i <= len(r.rows) }
func (r *rowsOf) Scan(dest ...any) error {
	*dest[0].(*[]byte) = []byte(r.rows[r.i-1])
	return nil
}
func (r *rowsOf) Err() error { return nil }

func TestDecodeRows(t *testing.T) {
	t.Parallel()
	recs, err := DecodeRows(&rowsOf{rows: []string{`{"session":"a","seq":1}`, `{"session":"a","seq":2}`}})
	if err != nil || len(recs) != 2 || recs[1].Seq != 2 || string(recs[1].Raw) != `{"session":"a","seq":2}` {
		t.Fatalf("%+v, %v", recs, err)
	}
	if _, err := DecodeRows(&rowsOf{rows: []string{`{"session":"a","seq":1}`, `{not json`}}); err == nil || !strings.Contains(err.Error(), "record 2 is corrupt") {
		t.Fatalf("corrupt row: %v", err)
	}
}

// TestSealEncodedIsSeal checks that a record sealed with its state and
// result encoded beforehand (as a store does, once for its rows and the
// record) is the record Seal makes, byte for byte, hash and all; and that
// the bytes given are what is written (not encoded again).
func TestSealEncodedIsSeal(t *testing.T) {
	t.Parallel()
	for i, r := range []*Record{sample("s", 0), sample("s", 1)} {
		r.State = &agentplane.Session{ID: "s", Mode: "ddr <&>", Version: int64(i + 2),
			PendingConfirmation: &agentplane.PendingConfirmation{Tool: "send", Args: []byte(`{"b": 1, "a": [1.0, "\u00e9"]}`), Question: "q?"}}
		r.Result.Output = []byte(`{"z": 1e2, "a": null}`)
		if i == 1 {
			r.Result = nil
		}
		want := *r
		if err := Seal(&want, 4, "prev"); err != nil {
			t.Fatal(err)
		}
		state, err := Canonical(r.State)
		if err != nil {
			t.Fatal(err)
		}
		result, err := Canonical(r.Result)
		if err != nil {
			t.Fatal(err)
		}
		if r.Result == nil {
			result = nil
		}
		got := *r
		if err := SealEncoded(&got, 4, "prev", Encoded{State: state, Result: result}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Raw, want.Raw) || got.Hash != want.Hash || got.Seq != 5 {
			t.Fatalf("record %d:\n%s\n%s", i, got.Raw, want.Raw)
		}
		if !bytes.Contains(want.Raw, append([]byte(`"state":`), state...)) {
			t.Fatalf("record %d holds no state %s: %s", i, state, want.Raw)
		}
		marked := *r
		if err := SealEncoded(&marked, 4, "prev", Encoded{State: []byte(`"given"`)}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(marked.Raw, []byte(`"state":"given"`)) {
			t.Fatalf("record %d: the state given was not written: %s", i, marked.Raw)
		}
	}
}
