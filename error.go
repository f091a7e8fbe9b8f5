package agentplane

import (
	"errors"
	"fmt"
)

// Error codes users see. The list is closed: every *Error carries one of them.
const (
	CodeInvalidInput         = "invalid_input"   // malformed turn input
	CodeInputTooLong         = "input_too_long"  // text over MaxInputBytes
	CodeInvalidConfig        = "invalid_config"  // configuration failed validation
	CodeUnknownAction        = "unknown_action"  // no such command or tool
	CodeInactiveAction       = "inactive_action" // not active for this session and principal
	CodeInvalidArgs          = "invalid_args"    // arguments fail the schema or name an unknown id
	CodePreconditionFailed   = "precondition_failed"
	CodeConfirmationRequired = "confirmation_required"
	CodeConfirmationInvalid  = "confirmation_invalid"
	CodeVersionConflict      = "version_conflict" // the session changed underneath
	CodeToolFailed           = "tool_failed"
	CodeToolUnavailable      = "tool_unavailable" // the tool is not connected
	CodeTimeout              = "timeout"
	CodeNotFound             = "not_found"           // no such session or record
	CodeInvalidState         = "invalid_state"       // a state that breaks an invariant
	CodeSourceUnavailable    = "source_unavailable"  // a catalog provider failed
	CodeRequestConflict      = "request_conflict"    // a request id reused for another invocation
	CodeRequestInProgress    = "request_in_progress" // the same request is still running
	CodeInterrupted          = "interrupted"         // it was running when its instance stopped, and may have acted
	CodeAlreadyAnswered      = "already_answered"    // a workflow's decision or approval was answered by another command
	CodeUnauthorized         = "unauthorized"        // no API key, or one the server does not know
	CodeForbidden            = "forbidden"           // the principal lacks the role the request needs (admin)
	CodeTooManyRequests      = "too_many_requests"   // a cap per principal (streams, MCP sessions, replays) or a rate is reached
	CodeUnavailable          = "unavailable"         // the server is shutting down: nothing was done; send it again after reconnecting
	CodeInternal             = "internal"
)

// Error is an error a user sees: a stable code and a human message.
type Error struct {
	Code    string
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, "" for nil
// and CodeInternal for any other error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the message of the first *Error in err's chain, and
// "internal error" for any other error: details of unexpected errors belong
// in the log, not in front of users.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
