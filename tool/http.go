package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/httpbody"
	"github.com/agentplane/agentplane/internal/sameorigin"
	"github.com/agentplane/agentplane/telemetry"
)

// MaxHTTPBody is the largest response an HTTP tool may return.
const MaxHTTPBody = 1 << 20

// HTTP is a tool that POSTs its arguments to a URL. The request body is
// {"args": ARGS, "context": INVOCATION_CONTEXT, "session_id": ...,
// "request_id": ...} (the context: agentplane.InvocationContext, who asks,
// in which mode, on which active item, how the call was authorised); the
// Idempotency-Key header carries the call's key (CallInfo.Key: the request
// id unless the caller set another), so a retried request is recognisable
// downstream. A 2xx JSON body is the result; a timeout, another status, a
// body that is not JSON or is larger than MaxHTTPBody is an *Error naming
// the status and quoting the start of the body.
type HTTP struct {
	S       Spec
	URL     string
	Headers map[string]string
	Timeout time.Duration // 0 means 10s
	// Client sends the request; nil means http.DefaultClient. Either way a
	// redirect to another origin is refused (it would carry the arguments
	// and the configured headers there).
	Client *http.Client
}

// Spec returns the spec.
func (h *HTTP) Spec() Spec { return h.S }

// ByKey reports whether a tool is idempotent by key: a call repeated with
// the same CallInfo.Key acts once downstream. HTTP tools send the key as
// Idempotency-Key, and the services they call are expected to honour it.
func ByKey(t Tool) bool {
	_, ok := t.(*HTTP)
	return ok
}

// Call posts the arguments. Its errors never quote the values of the
// headers it sent (a service that echoes them).
func (h *HTTP) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	out, err := h.call(ctx, args)
	return out, httpbody.Masked(err, h.Headers)
}

func (h *HTTP) call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ci, _ := CallInfoFrom(ctx)
	body, err := json.Marshal(struct {
		Args      json.RawMessage               `json:"args"`
		Context   *agentplane.InvocationContext `json:"context,omitempty"`
		SessionID string                        `json:"session_id,omitempty"`
		RequestID string                        `json:"request_id,omitempty"`
	}{args, ci.Invocation(), ci.Context.SessionID, ci.Context.RequestID})
	if err != nil {
		return nil, Errorf("bad_args", "%v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return nil, Errorf("bad_url", "%v", err)
	}
	for k, v := range h.Headers { // first: what agentplane sets is not the configuration's to change
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	telemetry.InjectHTTP(ctx, req.Header) // traceparent, when the call is traced
	req.Header.Del("Idempotency-Key")
	if k := ci.Key(); k != "" {
		req.Header.Set("Idempotency-Key", k)
	}
	resp, err := sameorigin.Client(h.Client).Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, Errorf("timeout", "POST %s: no answer within %s", h.URL, timeout)
		}
		return nil, Errorf("unreachable", "POST %s: %v", h.URL, err)
	}
	defer resp.Body.Close()
	b, tooLarge, err := httpbody.Read(resp.Body, MaxHTTPBody)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, Errorf("timeout", "POST %s: body not read within %s", h.URL, timeout)
		}
		return nil, Errorf("read_failed", "POST %s: %v", h.URL, err)
	}
	switch {
	case tooLarge:
		return nil, Errorf("too_large", "POST %s: status %d, body larger than %d bytes", h.URL, resp.StatusCode, MaxHTTPBody)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, Errorf("http_status", "POST %s: status %d: %s", h.URL, resp.StatusCode, httpbody.Snippet(b))
	case !json.Valid(b):
		return nil, Errorf("not_json", "POST %s: status %d, body is not JSON: %s", h.URL, resp.StatusCode, httpbody.Snippet(b))
	}
	return b, nil
}
