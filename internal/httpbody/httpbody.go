// Package httpbody reads bounded HTTP bodies and quotes them in errors, for
// the HTTP adapters (catalog providers, HTTP tools).
package httpbody

import (
	"fmt"
	"io"

	"github.com/agentplane/agentplane/redact"
)

// Read reads at most max bytes of r; tooLarge says r had more.
func Read(r io.Reader, max int) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, int64(max)+1))
	return body, len(body) > max, err
}

// Snippet quotes the start of a body for an error message.
func Snippet(b []byte) string {
	const n = 160
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

// Masked returns err with the values of the headers a request was sent
// with masked (redact) in its message: a service that answers with what
// it was sent — its credentials in an error body — has them quoted
// nowhere. nil stays nil.
func Masked(err error, sent map[string]string) error {
	if err == nil || len(sent) == 0 {
		return err
	}
	values := make([]string, 0, len(sent))
	for _, v := range sent {
		values = append(values, v)
	}
	r := redact.New(values...)
	if !r.Contains(err.Error()) {
		return err
	}
	return maskedError{msg: r.String(err.Error()), err: err}
}

// maskedError is an error whose message has secrets masked; it unwraps to
// the original for errors.Is and errors.As.
type maskedError struct {
	msg string
	err error
}

func (e maskedError) Error() string { return e.msg }
func (e maskedError) Unwrap() error { return e.err }
