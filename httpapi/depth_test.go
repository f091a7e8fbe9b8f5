package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
)

// nested is a JSON object nested depth deep: {"a":{"a":…{"a":1}}}.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// TestEveryDoorAtTheDepthLimit walks every door through which a value
// from outside reaches a session's records — intent arguments, a
// notification's payload, a workflow task's arguments, an MCP client's
// tool arguments, the LLM's tool-call arguments — with a value nested
// exactly canonjson.MaxValueDepth deep (accepted) and one level deeper
// (refused, the answer naming the depth, nothing stored that a reader
// refuses). Afterwards every session reads back whole: its audit, its
// verification, its replay, its history, its event stream, its export.
// (Values nested 127 deep were stored, and the records holding them
// nested past what the reader accepts: the session's audit, events,
// history, verification, replay and export failed for good.)
func TestEveryDoorAtTheDepthLimit(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{canonjson.MaxValueDepth, canonjson.MaxValueDepth + 1} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			t.Parallel()
			accepted := depth <= canonjson.MaxValueDepth
			deep := nested(depth - 1) // inside one object of the door's own: depth in all
			llm := llmtest.New(t, llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "catalog_search", Arguments: `{"query":"q","x":` + deep + `}`}}},
				llmtest.Reply{Text: "done"})
			e := newEnv(t, &envOptions{llm: llm})
			s := e.create("", map[string]any{"mode": "sales"})
			refusedNaming := func(door string, st int, raw []byte) {
				t.Helper()
				named := strings.Contains(string(raw), fmt.Sprintf("nested deeper than %d", canonjson.MaxValueDepth))
				switch {
				case accepted && named:
					t.Errorf("%s: a value %d deep was refused: %d %s", door, depth, st, raw)
				case !accepted && !named:
					t.Errorf("%s: a value %d deep was not refused for its depth: %d %s", door, depth, st, raw)
				}
			}
			doors := []struct {
				name string
				send func() (int, []byte)
			}{
				{"intent args", func() (int, []byte) {
					return e.rawBody("POST", "/v1/sessions/"+s.SessionID+"/intents", `{"type":"action_call","action":"catalog_search","args":{"query":"q","x":`+deep+`}}`)
				}},
				{"notification payload", func() (int, []byte) {
					return e.rawBody("POST", "/v1/notifications", `{"address":"SESSION","session_id":"`+s.SessionID+`","target":"USER","handler":"SYSTEM","title":"t","payload":`+nested(depth)+`}`)
				}},
				{"workflow task args", func() (int, []byte) {
					return e.rawBody("POST", "/v1/workflows", `{"session_id":"`+s.SessionID+`","tasks":[{"id":"a","tool":"catalog_search","args":{"query":"q","x":`+deep+`}}]}`)
				}},
				{"MCP tool arguments", func() (int, []byte) {
					cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp"}, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer cs.Close()
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "catalog_search", Arguments: json.RawMessage(`{"query":"q","x":` + deep + `}`)})
					if err != nil {
						return 0, []byte(err.Error())
					}
					raw, _ := json.Marshal(res)
					return 200, raw
				}},
				{"LLM tool-call arguments", func() (int, []byte) {
					return e.rawBody("POST", "/v1/sessions/"+s.SessionID+"/turns", `{"text":"tell me something about the weather"}`)
				}},
			}
			for _, d := range doors {
				st, raw := d.send()
				if st >= 500 {
					t.Fatalf("%s: %d %s", d.name, st, raw)
				}
				refusedNaming(d.name, st, raw)
			}
			var page httpapi.SessionList
			if st := e.call("GET", "/v1/sessions", "", nil, &page); st != 200 || len(page.Sessions) < 2 {
				t.Fatalf("sessions: %d %+v", st, page)
			}
			for _, info := range page.Sessions {
				readsBack(t, e, info.SessionID)
			}
		})
	}
}

// readsBack fails t unless every read of the session's records answers.
func readsBack(t *testing.T, e *env, id string) {
	t.Helper()
	for _, path := range []string{"/audit", "/audit/verification", "/audit/replay", "/history"} {
		if st, raw := e.rawBody("GET", "/v1/sessions/"+id+path, ""); st != 200 {
			t.Fatalf("session %s: GET %s: %d %s", id, path, st, raw)
		}
	}
	var v httpapi.Verification
	if st, raw := e.rawBody("GET", "/v1/sessions/"+id+"/audit/verification", ""); st != 200 || json.Unmarshal(raw, &v) != nil || !v.Verified {
		t.Fatalf("session %s: verification: %d %s", id, st, raw)
	}
	recs, err := e.core.Records(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("session %s: %v", id, err)
	}
	var export strings.Builder // what agentplane audit export writes, read back by its reader
	for _, r := range recs {
		export.Write(append(r.Raw, '\n'))
	}
	if _, err := audit.VerifyJSONL(strings.NewReader(export.String())); err != nil {
		t.Fatalf("session %s: the export does not read back: %v", id, err)
	}
	resp, cancel := e.stream(t, id, 0)
	defer cancel()
	got := readSSE(t, resp.Body, len(recs))
	if len(got) != len(recs) {
		t.Fatalf("session %s: the stream gave %d of %d events", id, len(got), len(recs))
	}
}

// rawBody sends a request with a raw body and returns the status and body.
func (e *env) rawBody(method, path, body string) (int, []byte) {
	e.t.Helper()
	st, _, raw := e.raw(method, path, "", body)
	return st, []byte(raw)
}
