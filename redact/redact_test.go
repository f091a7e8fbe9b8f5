package redact_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/redact"
)

func TestString(t *testing.T) {
	r := redact.New("Bearer s3cr3t-token", "", "abc", `pa"ss\word`)
	for _, c := range []struct{ name, in, want string }{
		{"Whole", "got Bearer s3cr3t-token from you", "got [redacted] from you"},
		{"TokenAlone", "token s3cr3t-token rejected", "token [redacted] rejected"},
		{"Twice", "s3cr3t-token/s3cr3t-token", "[redacted]/[redacted]"},
		{"ShortOnesAreNoSecrets", "abc", "abc"},
		{"Quotes", `password pa"ss\word`, "password [redacted]"},
		{"Nothing", "nothing here", "nothing here"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := r.String(c.in); got != c.want {
				t.Fatalf("%q → %q, want %q", c.in, got, c.want)
			}
		})
	}
	if redact.New("", "ab") != nil {
		t.Fatal("a redactor of nothing")
	}
	var none *redact.Redactor
	if none.String("x s3cr3t") != "x s3cr3t" || string(none.JSON([]byte(`{"a":1}`))) != `{"a":1}` || none.Contains("x") {
		t.Fatal("a nil redactor changed something")
	}
}

func TestJSON(t *testing.T) {
	r := redact.New(`pa"ss\word`, "Basic dXNlcjpwYXNz")
	for _, c := range []struct{ name, in, want string }{
		{"Escaped", `{"echo":"pa\"ss\\word"}`, `{"echo":"[redacted]"}`},
		{"InAName", `{"dXNlcjpwYXNz":1}`, `{"[redacted]":1}`},
		{"Untouched", `{"a":[1,2]}`, `{"a":[1,2]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := r.JSON(json.RawMessage(c.in))
			if string(got) != c.want || !json.Valid(got) {
				t.Fatalf("%s → %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	r := redact.New("Bearer s3cr3t-token")
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("service", "echoes s3cr3t-token")
	log.Error("call failed: s3cr3t-token", "err", errors.New("401 Bearer s3cr3t-token"), "body", json.RawMessage(`{"h":"s3cr3t-token"}`),
		slog.Group("req", "auth", "Bearer s3cr3t-token"), "n", 3)
	out := buf.String()
	if strings.Contains(out, "s3cr3t") || strings.Count(out, redact.Mask) != 5 || !strings.Contains(out, `"n":3`) {
		t.Fatalf("%s", out)
	}
}

// FuzzJSON: whatever the secrets and the JSON, the masked JSON is JSON
// still and holds none of the secrets.
func FuzzJSON(f *testing.F) {
	f.Add("s3cr3t", `{"a":"s3cr3t"}`)
	f.Add(`q"uo\te`, `["q\"uo\\te", 1]`)
	f.Fuzz(func(t *testing.T, secret, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		r := redact.New(secret)
		got := r.JSON(json.RawMessage(doc))
		if !json.Valid(got) {
			t.Fatalf("%q masked in %s: %s is not JSON", secret, doc, got)
		}
		var strs []string // every name and string value of the result
		dec := json.NewDecoder(strings.NewReader(string(got)))
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			if s, ok := tok.(string); ok {
				strs = append(strs, s)
			}
		}
		for _, s := range strs {
			if r.Contains(strings.ReplaceAll(s, redact.Mask, "\x00")) {
				t.Fatalf("%q is still in %q of %s", secret, s, got)
			}
		}
	})
}

// TestAdd: a Redactor learns secrets later (a reloaded configuration's)
// and keeps masking the ones it had.
func TestAdd(t *testing.T) {
	r := redact.Growing()
	if r == nil || r.String("old-secret new-secret") != "old-secret new-secret" {
		t.Fatal("an empty Growing redactor masks something, or is nil")
	}
	r.Add("old-secret")
	r.Add("Bearer new-secret", "ab") // too short: not a secret
	if got := r.String("old-secret new-secret ab"); got != "[redacted] [redacted] ab" {
		t.Fatalf("%q", got)
	}
	if redact.New() != nil {
		t.Fatal("New of nothing is not nil")
	}
}
