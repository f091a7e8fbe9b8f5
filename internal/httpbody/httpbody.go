// Package httpbody reads bounded HTTP bodies and quotes them in errors, for
// the HTTP adapters (catalog providers, HTTP tools).
package httpbody

import (
	"fmt"
	"io"
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
