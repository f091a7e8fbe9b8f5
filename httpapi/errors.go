package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentplane/agentplane"
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
	case agentplane.CodeInactiveAction:
		return http.StatusForbidden
	case agentplane.CodeVersionConflict, agentplane.CodeRequestConflict, agentplane.CodeRequestInProgress,
		agentplane.CodeConfirmationInvalid, agentplane.CodeInvalidState:
		return http.StatusConflict
	case agentplane.CodePreconditionFailed:
		return http.StatusUnprocessableEntity
	case agentplane.CodeTimeout:
		return http.StatusGatewayTimeout
	case agentplane.CodeToolUnavailable, agentplane.CodeSourceUnavailable:
		return http.StatusServiceUnavailable
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

// maxBody is the largest request body read; bodyTimeout is how long
// reading it may take.
const (
	maxBody     = 1 << 20
	bodyTimeout = 30 * time.Second
)

// decode reads a JSON object from the request body into v strictly:
// unknown fields, a wrong type, trailing data or a body over 1 MiB are
// errors naming the field or the byte offset. An empty body is {} when
// empty is allowed.
func decode(w http.ResponseWriter, r *http.Request, v any, empty bool) error {
	// a client sending its body slowly is cut; once it is read, the
	// connection may stay quiet while the turn runs
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	defer rc.SetReadDeadline(time.Time{})
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return withStatus(http.StatusUnsupportedMediaType, agentplane.CodeInvalidInput, "Content-Type %q: send application/json", ct)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("reading the body: %v", err)
	}
	if len(body) > maxBody {
		return agentplane.Errorf(agentplane.CodeInputTooLong, "the body is over %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if empty {
			return nil
		}
		return invalid("the body is empty: send a JSON object")
	}
	if !utf8.Valid(body) {
		return invalid("the body is not UTF-8 (an invalid byte at %d)", invalidUTF8At(body))
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, int64(len(body)))
	}
	if dec.More() {
		return invalid("the body holds more than one JSON value (at byte %d)", dec.InputOffset())
	}
	return nil
}

// invalidUTF8At returns the offset of the first byte that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// jsonError says what was wrong with a JSON body and where.
func jsonError(err error, offset int64) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalid("the body is not JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("the body is a JSON %s; send an object", typ.Value)
		}
		return invalid("field %q: expected %s, found a JSON %s (at byte %d)", typ.Field, jsonType(typ.Type.String()), typ.Value, typ.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("the body ends in the middle of a JSON value (at byte %d)", offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid("unknown field %s (at byte %d)", strings.TrimPrefix(err.Error(), "json: unknown field "), offset)
	}
	return invalid("the body is not valid: %v", err)
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
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentplane"`)
	}
	writeJSON(w, st, ErrorBody{Error: ErrorDetail{Code: code, Message: agentplane.ErrorMessage(err)}})
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
