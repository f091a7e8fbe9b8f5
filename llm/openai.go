package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
)

// Request is what one call of the model sends: the messages, the tools
// offered (OpenAI function definitions), and the sampling temperature.
type Request struct {
	Messages []agentplane.LLMMessage
	// History is how many of Messages, after the system prompt, are the
	// conversation's history built from the chain.
	History     int
	Tools       []map[string]any
	Temperature *float64
	// Aware are the awareness lines the system prompt holds (not sent on
	// their own): what came from outside the session's chain, recorded
	// with the exchange so that replay builds the same prompt.
	Aware []string
}

// Model answers a request, streaming text deltas to onText as they
// arrive; tool calls are returned whole. Attempts is how many HTTP
// requests it took.
type Model interface {
	Complete(ctx context.Context, req Request, onText func(string)) (res agentplane.LLMResponse, attempts int, err error)
	Name() string
}

// Settings are the endpoint's settings once the environment is applied.
type Settings struct {
	config.LLM
	APIKey string // never logged or recorded
}

// FromEnv applies the environment to the configured endpoint:
// AGENTPLANE_LLM_BASE_URL and AGENTPLANE_LLM_MODEL override (and, with no
// llm section, configure) it; the key is AGENTPLANE_LLM_API_KEY, else the
// variable api_key_env names, else OPENAI_API_KEY. ok is false when no
// LLM is configured. A key variable that is named and unset is an error.
func FromEnv(cfg *config.LLM, getenv func(string) string) (s Settings, ok bool, err error) {
	base, model := getenv("AGENTPLANE_LLM_BASE_URL"), getenv("AGENTPLANE_LLM_MODEL")
	switch {
	case cfg != nil:
		s.LLM = *cfg
	case base != "" && model != "":
		s.LLM = config.LLM{Timeout: config.DefaultLLMTimeout, MaxToolRounds: config.DefaultMaxToolRounds, MaxHistoryTurns: config.DefaultMaxHistoryTurns}
	case base != "" || model != "":
		return s, false, errors.New("llm: set both AGENTPLANE_LLM_BASE_URL and AGENTPLANE_LLM_MODEL, or an llm section in the configuration")
	default:
		return s, false, nil
	}
	if base != "" {
		s.BaseURL = strings.TrimRight(base, "/")
	}
	if model != "" {
		s.Model = model
	}
	s.APIKey = getenv("AGENTPLANE_LLM_API_KEY")
	if s.APIKey == "" && s.APIKeyEnv != "" {
		if s.APIKey = getenv(s.APIKeyEnv); s.APIKey == "" {
			return s, false, fmt.Errorf("llm.api_key_env: environment variable %s is not set (or set AGENTPLANE_LLM_API_KEY)", s.APIKeyEnv)
		}
	}
	if s.APIKey == "" {
		s.APIKey = getenv("OPENAI_API_KEY")
	}
	return s, true, nil
}

// maxResponse bounds what one response may bring.
const maxResponse = 8 << 20

// OpenAI is a Model on an OpenAI-compatible chat-completions endpoint,
// through the official SDK: streaming, the SDK's accumulator for tool
// calls, its bounded retries of timeouts, 429 and 5xx, and one more
// attempt when a stream is cut.
type OpenAI struct {
	client   openai.Client
	settings Settings
}

// NewOpenAI returns the model of the settings. httpClient nil means a
// default one.
func NewOpenAI(s Settings, httpClient *http.Client) *OpenAI {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	m := &OpenAI{settings: s}
	counted := &http.Client{Transport: countingTransport{next: transport(httpClient)}, CheckRedirect: httpClient.CheckRedirect}
	opts := []option.RequestOption{option.WithBaseURL(s.BaseURL + "/"), option.WithHTTPClient(counted), option.WithMaxRetries(2),
		option.WithRequestTimeout(s.Timeout)}
	key := s.APIKey
	if key == "" {
		key = "none" // local servers want no key; the SDK wants one
	}
	opts = append(opts, option.WithAPIKey(key))
	m.client = openai.NewClient(opts...)
	return m
}

// Name returns the model's name.
func (m *OpenAI) Name() string { return m.settings.Model }

func transport(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// countingTransport counts each call's requests — in the counter its
// context carries (attemptsKey), so concurrent calls of one model count
// only their own — and bounds response bodies.
type countingTransport struct {
	next http.RoundTripper
}

// attemptsKey is the context key of a call's request counter.
type attemptsKey struct{}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if n, ok := r.Context().Value(attemptsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxResponse}
	}
	return resp, err
}

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the response is over %d MiB", maxResponse>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// wireMessage is a message in the chat-completions wire form.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// body is the request as the endpoint receives it.
func (m *OpenAI) body(req Request) ([]byte, error) {
	msgs := make([]wireMessage, len(req.Messages))
	for i, msg := range req.Messages {
		w := wireMessage{Role: msg.Role, Content: msg.Content, ToolCallID: msg.ToolCallID}
		for _, tc := range msg.ToolCalls {
			var wc wireToolCall
			wc.ID, wc.Type = tc.ID, "function"
			wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
			w.ToolCalls = append(w.ToolCalls, wc)
		}
		msgs[i] = w
	}
	b := map[string]any{"model": m.settings.Model, "messages": msgs, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	if len(req.Tools) > 0 {
		b["tools"] = req.Tools
	}
	if t := req.Temperature; t != nil {
		b["temperature"] = *t
	}
	return json.Marshal(b)
}

// Complete sends the request and assembles the streamed answer. A stream
// cut before it finished is tried once more from the start (the text
// already streamed is then streamed again: onText gets "\n[retrying]\n"
// first).
func (m *OpenAI) Complete(ctx context.Context, req Request, onText func(string)) (agentplane.LLMResponse, int, error) {
	raw, err := m.body(req)
	if err != nil {
		return agentplane.LLMResponse{}, 0, err
	}
	var params openai.ChatCompletionNewParams
	if err := params.UnmarshalJSON(raw); err != nil {
		return agentplane.LLMResponse{}, 0, fmt.Errorf("llm: build the request: %w", err)
	}
	attempts := new(atomic.Int64) // this call's requests, retries included
	ctx = context.WithValue(ctx, attemptsKey{}, attempts)
	var res agentplane.LLMResponse
	for try := 0; ; try++ {
		var streamed bool
		res, streamed, err = m.stream(ctx, params, onText)
		if err == nil || try == 1 || !streamed || ctx.Err() != nil {
			break
		}
		if onText != nil {
			onText("\n[retrying]\n")
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return res, int(attempts.Load()), err
}

// stream makes one streaming request; streamed says the stream had begun
// when it failed.
func (m *OpenAI) stream(ctx context.Context, params openai.ChatCompletionNewParams, onText func(string)) (agentplane.LLMResponse, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, m.settings.Timeout)
	defer cancel()
	stream := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		chunks++
		if onText != nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			onText(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		return agentplane.LLMResponse{}, chunks > 0, describe(err)
	}
	if len(acc.Choices) == 0 {
		return agentplane.LLMResponse{}, chunks > 0, errors.New("the endpoint answered with no completion (is it an OpenAI-compatible chat-completions endpoint?)")
	}
	choice := acc.Choices[0]
	res := agentplane.LLMResponse{Text: choice.Message.Content, FinishReason: string(choice.FinishReason),
		Usage: agentplane.LLMUsage{PromptTokens: acc.Usage.PromptTokens, CompletionTokens: acc.Usage.CompletionTokens, TotalTokens: acc.Usage.TotalTokens}}
	for _, tc := range choice.Message.ToolCalls {
		res.ToolCalls = append(res.ToolCalls, agentplane.LLMToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if choice.FinishReason == "" { // every OpenAI-compatible server ends a completion with one
		return agentplane.LLMResponse{}, true, errors.New("the stream ended before the completion finished")
	}
	return res, false, nil
}

// describe says what went wrong with a request, briefly: the status and
// the endpoint's message, never the key.
func describe(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(string(bytes.TrimSpace([]byte(apiErr.RawJSON()))))
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return fmt.Errorf("the endpoint answered %d: %s", apiErr.StatusCode, msg)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("the endpoint did not answer in time")
	}
	return err
}

// Check asks the endpoint for its models and reports, clearly, an
// endpoint that does not answer (or not as an OpenAI-compatible one), a
// key it refuses, or a model it does not serve.
func (m *OpenAI) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(m.settings.Timeout, 10*time.Second))
	defer cancel()
	pager := m.client.Models.ListAutoPaging(ctx)
	var names []string
	for pager.Next() {
		id := pager.Current().ID
		if id == m.settings.Model {
			return nil
		}
		if len(names) < 10 {
			names = append(names, id)
		}
	}
	if err := pager.Err(); err != nil {
		return fmt.Errorf("llm: %s: %v", m.settings.BaseURL, describe(err))
	}
	return fmt.Errorf("llm: %s does not serve model %q (it serves %s)", m.settings.BaseURL, m.settings.Model, strings.Join(names, ", "))
}
