package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A panic in a handler is recovered, logged with the request id, and
// answered 500 with the envelope and nothing of the panic's details.
func TestPanicIsAnInternalError(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil)), idPrefix: "t-"}
	h := s.observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("secret detail") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/x", nil))
	var body ErrorBody
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code != "internal" || strings.Contains(rec.Body.String(), "secret") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	id := rec.Header().Get("X-Request-ID")
	if !strings.Contains(logs.String(), "secret detail") || !strings.Contains(logs.String(), id) {
		t.Fatalf("the panic was not logged with the request id %q: %s", id, logs.String())
	}
}

func TestCheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "127.0.0.2:9": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "[::]:80": false, "example.com:80": false} {
		if err := CheckAddr(addr, 0); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if err := CheckAddr(addr, 1); err != nil {
			t.Errorf("%s with keys: %v", addr, err)
		}
	}
}
