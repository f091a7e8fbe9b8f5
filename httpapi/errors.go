package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/internal/canonjson"
)

// ErrorBody is the one error envelope: {"error": {"code", "message"}},
// the code from the closed list (agentplane.Code*).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what went wrong.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// status is the HTTP status of an error code.
func status(code string) int {
	switch code {
	case agentplane.CodeInvalidInput, agentplane.CodeInvalidArgs, agentplane.CodeInvalidConfig:
		return http.StatusBadRequest
	case agentplane.CodeInputTooLong:
		return http.StatusRequestEntityTooLarge
	case agentplane.CodeUnauthorized:
		return http.StatusUnauthorized
	case agentplane.CodeNotFound, agentplane.CodeUnknownAction:
		return http.StatusNotFound
	case agentplane.CodeInactiveAction, agentplane.CodeForbidden:
		return http.StatusForbidden
	case agentplane.CodeVersionConflict, agentplane.CodeRequestConflict, agentplane.CodeRequestInProgress,
		agentplane.CodeConfirmationInvalid, agentplane.CodeInvalidState, agentplane.CodeAlreadyAnswered:
		return http.StatusConflict
	case agentplane.CodePreconditionFailed:
		return http.StatusUnprocessableEntity
	case agentplane.CodeTimeout:
		return http.StatusGatewayTimeout
	case agentplane.CodeToolUnavailable, agentplane.CodeSourceUnavailable, agentplane.CodeUnavailable:
		return http.StatusServiceUnavailable
	case agentplane.CodeTooManyRequests:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// apiError is an error with the status to answer it with, when the code's
// own status is not the one (405, 406).
type apiError struct {
	status int
	err    *agentplane.Error
}

func (e *apiError) Error() string { return e.err.Message }
func (e *apiError) Unwrap() error { return e.err }

func withStatus(status int, code, format string, args ...any) error {
	return &apiError{status: status, err: agentplane.Errorf(code, format, args...)}
}

func invalid(format string, args ...any) error {
	return agentplane.Errorf(agentplane.CodeInvalidInput, format, args...)
}

// maxBody is the largest request body read; DefaultBodyTimeout is how
// long a body may take to arrive, from the request's start (see guard).
const (
	maxBody            = 1 << 20
	DefaultBodyTimeout = 30 * time.Second
)

// decode reads a JSON object from the request body into v strictly (see
// decodeJSON); a body over 1 MiB is an error, and an empty body is {}
// when empty is allowed. The body's time limit is the guard's.
func decode(r *http.Request, v any, empty bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("reading the body: %v", err)
	}
	if len(body) > maxBody {
		return agentplane.Errorf(agentplane.CodeInputTooLong, "the body is over %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if empty {
			return nil
		}
		return invalid("the body is empty: send a JSON object")
	}
	return decodeJSON(body, "the body", v)
}

// decodeJSON reads one JSON object from data into v by the rules the audit
// log's reader applies, so that nothing is accepted that could not be
// read back: member names that repeat or differ only in letter case,
// invalid UTF-8, a lone surrogate, a number out of range, nesting deeper
// than a stored document may (canonjson.MaxDepth) and data after the object
// are refused, naming the byte and the member; so are unknown fields and
// values of the wrong type. The values the body carries — arguments,
// payloads — are held to the depth of a value (canonjson.MaxValueDepth) by
// their own door, the same for every front end. It is the one
// decoder of HTTP bodies and WebSocket messages; what names the input in
// messages ("the body", "the message").
func decodeJSON(data []byte, what string, v any) error {
	if err := canonjson.CheckDocument(data); err != nil {
		return invalid("%s is not strict JSON: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(what, err, int64(len(data)))
	}
	return nil
}

// checkRequestID checks a client's request id or idempotency key (field names
// it in the message): 1 to 255 visible ASCII characters, or empty.
func checkRequestID(field, id string) error {
	if len(id) > 255 {
		return invalid("%s is %d bytes; at most 255", field, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return invalid("%s holds a byte 0x%02x at %d: only visible ASCII is allowed", field, id[i], i)
		}
	}
	return nil
}

// jsonError says what was wrong with a JSON input and where.
func jsonError(what string, err error, offset int64) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalid("%s is not JSON: %v (at byte %d)", what, syn, syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("%s is a JSON %s; send an object", what, typ.Value)
		}
		return invalid("field %q: expected %s, found a JSON %s (at byte %d)", typ.Field, jsonType(typ.Type.String()), typ.Value, typ.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("%s ends in the middle of a JSON value (at byte %d)", what, offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid("%s: unknown field %s", what, strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return invalid("%s is not valid: %v", what, err)
}

func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// writeError answers with the envelope; an error that is not a user error
// is logged and answered as internal, without its details.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := agentplane.ErrorCode(err)
	st := status(code)
	var ae *apiError
	if errors.As(err, &ae) {
		st = ae.status
	}
	if code == agentplane.CodeInternal {
		s.log.Error("request failed", "request_id", requestID(r.Context()), "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if code == agentplane.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", s.challenge(r, err))
		if isScope(err) {
			st = http.StatusForbidden // RFC 6750 §3.1
		}
	}
	msg := s.redact.String(agentplane.ErrorMessage(err)) // a provider's error may quote what it was sent
	writeJSON(w, st, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}

// isScope reports whether err refuses a token for its scope.
func isScope(err error) bool {
	var te *auth.TokenError
	return errors.As(err, &te) && te.Code == "insufficient_scope"
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
