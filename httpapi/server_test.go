package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
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
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "[::]:80": false, "example.com:80": false,
		// names that merely start like loopback ones are resolved by DNS
		"127.evil:80": false, "127.0.0.1.evil.example:80": false, "localhost.evil.example:80": false} {
		if err := CheckAddr(addr, 0); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if err := CheckAddr(addr, 1); err != nil {
			t.Errorf("%s with keys: %v", addr, err)
		}
	}
}

func TestCheckAddrRefusesNonsense(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "nope", ""} {
		if err := CheckAddr(addr, 1); err == nil {
			t.Errorf("%q accepted", addr)
		}
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, ok := range map[string]bool{"localhost": true, "localhost:8080": true, "LOCALHOST.": true, "app.localhost:1": true,
		"127.0.0.1:8080": true, "127.9.9.9": true, "[::1]:80": true, "::1": true,
		"evil.example": false, "evil.example:8080": false, "127.evil": false, "localhost.evil.example": false, "": false,
		"0.0.0.0:8080": false, "[::]:80": false, "10.0.0.1": false} {
		if loopbackHost(host) != ok {
			t.Errorf("%q: want %v", host, ok)
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	for o, ok := range map[string]bool{"https://app.example.com": true, "http://localhost:3000": true,
		"https://app.example.com/": false, "app.example.com": false, "ftp://x": false, "https://u@x": false, "https://x?q=1": false, "*": false} {
		if err := CheckOrigin(o); (err == nil) != ok {
			t.Errorf("%q: %v", o, err)
		}
	}
}

// Health checks (a balancer's, every second or two per instance) are
// logged only at debug; every other request at info.
func TestHealthChecksAreLoggedAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		for path, quiet := range map[string]bool{"/healthz": true, "/readyz": true, "/v1/modes": false, "/metrics": false, "/nowhere": false} {
			var logs bytes.Buffer
			s := &Server{log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level})), idPrefix: "t-"}
			mux := http.NewServeMux()
			for _, p := range []string{"GET /healthz", "GET /readyz", "GET /v1/modes", "GET /metrics"} {
				mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
			}
			s.observe(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
			logged := strings.Contains(logs.String(), `"msg":"http"`) && strings.Contains(logs.String(), `"path":"`+path+`"`)
			if want := level == slog.LevelDebug || !quiet; logged != want {
				t.Errorf("GET %s at level %s: logged %v, want %v: %s", path, level, logged, want, logs.String())
			}
		}
	}
}
