package agentplane

import "encoding/json"

// LLMMessage is one chat message as it is sent to the LLM, in the
// OpenAI chat-completions roles.
type LLMMessage struct {
	Role       string        `json:"role"` // system | user | assistant | tool
	Content    string        `json:"content"`
	ToolCalls  []LLMToolCall `json:"tool_calls,omitempty"`   // assistant
	ToolCallID string        `json:"tool_call_id,omitempty"` // tool: the call it answers
}

// LLMToolCall is a tool call the model asked for.
type LLMToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // as the model wrote them: JSON text, possibly malformed
}

// LLMResponse is the model's answer to one request, assembled from its
// stream.
type LLMResponse struct {
	Text         string        `json:"text,omitempty"`
	ToolCalls    []LLMToolCall `json:"tool_calls,omitempty"`
	FinishReason string        `json:"finish_reason,omitempty"`
	Usage        LLMUsage      `json:"usage"`
}

// LLMUsage is the tokens one exchange used, as the endpoint reported them.
type LLMUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// LLMExchange is one request to the LLM and its answer, as the audit log
// records it: the messages sent, the names of the tools offered, the
// response, or why there was none.
type LLMExchange struct {
	Model string `json:"model"`
	// Messages are the messages sent — without the conversation history
	// when HistoryMessages is set: then the system prompt, and what
	// followed the history (an internal turn's own), because the chain
	// holds the conversation already and a record that repeated it would
	// grow every round of a tool loop.
	Messages []LLMMessage `json:"messages"`
	// HistoryFrom is the sequence number of the first chain record the
	// history was read from, and HistoryMessages how many messages it gave,
	// which stood between the system prompt and the rest.
	HistoryFrom     int64 `json:"history_from,omitempty"`
	HistoryMessages int   `json:"history_messages,omitempty"`
	// Digest is the SHA-256 of every message sent, history included, as
	// JSON (hex): replay rebuilds the request and checks it exactly.
	Digest string   `json:"digest,omitempty"`
	Tools  []string `json:"tools"`
	// Aware are the awareness lines the system prompt held (notifications
	// for the agent, what the user saw): input from outside the session's
	// chain, kept so that replay builds the same prompt.
	Aware    []string     `json:"aware,omitempty"`
	Response *LLMResponse `json:"response,omitempty"`
	Error    string       `json:"error,omitempty"` // after every attempt failed
	Attempts int          `json:"attempts"`
	// Internal marks an internal turn's exchange (a notification the
	// agent handles on its own): not part of the conversation's history.
	Internal bool `json:"internal,omitempty"`
}

// Notice is a notification shown on the conversation floor (channel B of
// the notification protocol): a system pill in the session's history.
type Notice struct {
	ID      string          `json:"id"` // the notification's
	Title   string          `json:"title"`
	Body    string          `json:"body,omitempty"`
	Urgency string          `json:"urgency,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}
