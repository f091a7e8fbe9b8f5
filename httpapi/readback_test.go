package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/notify"
)

// hostileText generates JSON text as a hostile client writes it: valid
// JSON mostly, with member names that repeat or differ only in letter
// case, numbers out of range, nesting past the limit, lone surrogates,
// escaped control characters, invalid UTF-8 and data after the value.
func hostileText(depth int) *rapid.Generator[string] {
	str := rapid.SampledFrom([]string{`"x"`, `"Ärger"`, `"\ud800"`, `"\udc00x"`, `"a\u0000b"`, "\"caf\xe9\"", `"\ud83d\ude00"`, `""`, `"<script>"`, `"é"`})
	num := rapid.SampledFrom([]string{"1", "-0", "1e999", "-1e400", "1.5", "12345678901234567890", "1e-999", "0.1"})
	name := rapid.SampledFrom([]string{"a", "A", "text", "Text", "mode", "list_id", "query", "é", "É", "k"})
	return rapid.Custom(func(t *rapid.T) string {
		switch k := rapid.IntRange(0, 6).Draw(t, "kind"); {
		case depth <= 0 || k == 0:
			return str.Draw(t, "str")
		case k == 1:
			return num.Draw(t, "num")
		case k == 2:
			return rapid.SampledFrom([]string{"true", "null", strings.Repeat("[", 130) + strings.Repeat("]", 130)}).Draw(t, "lit")
		case k == 3:
			items := rapid.SliceOfN(hostileText(depth-1), 0, 3).Draw(t, "items")
			return "[" + strings.Join(items, ",") + "]"
		default:
			n := rapid.IntRange(0, 3).Draw(t, "members")
			var b strings.Builder
			b.WriteByte('{')
			for i := range n {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%q:%s", name.Draw(t, "name"), hostileText(depth-1).Draw(t, "value"))
			}
			b.WriteByte('}')
			return b.String()
		}
	})
}

// TestWhateverIsAcceptedCanBeReadBack is a property: whatever a hostile
// client sends to the entry points that write — turns, intents with
// arguments, notifications with payloads and titles, workflows with
// arguments — is refused (4xx, nothing stored) or stored so that the
// session's audit chain still reads and verifies, and each stored
// notification reads back. (A payload {"a":1,"A":2} was accepted and made
// the session's audit log unreadable for good: every read answered 500.)
func TestWhateverIsAcceptedCanBeReadBack(t *testing.T) {
	e := newEnv(t, nil)
	client := e.srv.Client()
	s := e.create("", nil)
	post := func(t *rapid.T, path, body string) (int, []byte) {
		req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, raw)
		}
		return resp.StatusCode, raw
	}
	var notifications []string
	rapid.Check(t, func(t *rapid.T) {
		v := hostileText(3).Draw(t, "value")
		str := rapid.SampledFrom([]string{`"hello"`, `"\ud800"`, "\"caf\xe9\"", `"x\u0000"`}).Draw(t, "string")
		switch rapid.IntRange(0, 4).Draw(t, "entry") {
		case 0:
			post(t, "/v1/sessions/"+s.SessionID+"/turns", `{"text":`+str+`}`)
		case 1:
			post(t, "/v1/sessions/"+s.SessionID+"/turns", v)
		case 2:
			action := rapid.SampledFrom([]string{"agent_set_mode", "catalog_search", "set_mode", "send_template", "agent_notify_user"}).Draw(t, "action")
			post(t, "/v1/sessions/"+s.SessionID+"/intents", `{"type":"action_call","action":"`+action+`","args":`+v+`}`)
		case 3:
			st, raw := post(t, "/v1/notifications", `{"address":"SESSION","session_id":"`+s.SessionID+`","target":"USER","handler":"SYSTEM","title":`+str+`,"payload":`+v+`}`)
			var created struct {
				ID string `json:"id"`
			}
			if st < 300 && json.Unmarshal(raw, &created) == nil {
				notifications = append(notifications, created.ID)
			}
		case 4:
			post(t, "/v1/workflows", `{"session_id":"`+s.SessionID+`","tasks":[{"id":"a","tool":"catalog_search","args":`+v+`}]}`)
		}
	})
	resp, err := client.Get(e.srv.URL + "/v1/sessions/" + s.SessionID + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the audit log no longer reads: %d %s", resp.StatusCode, raw)
	}
	recs, err := e.core.Records(context.Background(), s.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatalf("the chain of %d records does not verify: %v", len(recs), err)
	}
	for _, r := range recs {
		if err := canonjson.Check(r.Raw); err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
	}
	for _, id := range notifications {
		var n notify.Notification
		if st := e.call("GET", "/v1/notifications/"+id, "", nil, &n); st != 200 || n.ID != id {
			t.Fatalf("notification %s: %d", id, st)
		}
	}
	t.Logf("%d records, %d notifications stored", len(recs), len(notifications))
}
