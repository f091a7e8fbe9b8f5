// Package llmtest is an OpenAI-compatible chat-completions server for
// tests: it streams scripted replies in the real wire format (chunks,
// tool_calls split across chunks, usage, [DONE]) and keeps every request
// it received.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Reply is one scripted answer: text and/or tool calls; or a failure:
// an HTTP status (429, 500, …) with a body, a stream cut after some
// chunks, a delay before answering, or a raw body.
type Reply struct {
	Text      string
	ToolCalls []Call
	Status    int           // not 0: answer with this status and Body
	Body      string        // with Status, or alone: the raw body (no streaming)
	CutAfter  int           // not 0: end the stream after this many chunks, without [DONE]
	Delay     time.Duration // before the first byte
	Chunk     int           // bytes of text per chunk; 0 means 8
	Pause     time.Duration // between text chunks (a slow model)
}

// Call is a scripted tool call.
type Call struct {
	Name      string
	Arguments string
}

// Server is the fake endpoint.
type Server struct {
	URL    string   // base URL, ending in /v1
	Models []string // what GET /models lists; New sets "test-model"
	// Respond, when set, answers every request by what it asks (the
	// decoded body) instead of the script: a model for tests whose
	// requests come in no fixed order. Set it before the first request.
	Respond func(req map[string]any) Reply

	mu       sync.Mutex
	script   []Reply
	requests []map[string]any
	raw      [][]byte
}

// New starts a server with a script, closed when the test ends.
func New(tb testing.TB, script ...Reply) *Server {
	s := &Server{script: script, Models: []string{"test-model"}}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

// Add appends replies to the script.
func (s *Server) Add(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, r...)
}

// Requests returns the request bodies received, decoded.
func (s *Server) Requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.requests...)
}

// Raw returns the request bodies received, as sent.
func (s *Server) Raw() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.raw...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		var data []any
		for _, m := range s.Models {
			data = append(data, map[string]any{"id": m, "object": "model", "created": 1, "owned_by": "test"})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	json.Unmarshal(body, &req)
	s.mu.Lock()
	s.raw = append(s.raw, body)
	s.requests = append(s.requests, req)
	var rep Reply
	switch {
	case s.Respond != nil:
		s.mu.Unlock()
		rep = s.Respond(req)
	case len(s.script) == 0:
		s.mu.Unlock()
		http.Error(w, `{"error":{"message":"the test script has no more replies"}}`, http.StatusInternalServerError)
		return
	default:
		rep = s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
	}
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.Body)
		return
	}
	if rep.Body != "" {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, rep.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	n := 0
	send := func(v any) bool {
		if rep.CutAfter > 0 && n == rep.CutAfter {
			return false
		}
		raw, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", raw)
		flush()
		n++
		return true
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	size := rep.Chunk
	if size <= 0 {
		size = 8
	}
	for i, part := range split(rep.Text, size) {
		if i > 0 && rep.Pause > 0 {
			select {
			case <-time.After(rep.Pause):
			case <-r.Context().Done():
				return
			}
		}
		if !send(chunk(map[string]any{"content": part}, nil)) {
			return
		}
	}
	for i, c := range rep.ToolCalls {
		first := map[string]any{"index": i, "id": fmt.Sprintf("call_%d", i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if !send(chunk(map[string]any{"tool_calls": []any{first}}, nil)) {
			return
		}
		for _, part := range split(c.Arguments, 5) {
			if !send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil)) {
				return
			}
		}
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if !send(chunk(map[string]any{}, finish)) {
		return
	}
	if !send(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req["model"], "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}}) {
		return
	}
	io.WriteString(w, "data: [DONE]\n\n")
	flush()
}

// split cuts s into pieces of at most n bytes (on rune boundaries).
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}
