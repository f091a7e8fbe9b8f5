// Package gzipped negotiates and writes gzip-compressed HTTP responses,
// for the page's files and the API's larger pages.
package gzipped

import (
	"compress/gzip"
	"net/http"
	"strings"
)

// Accepts reports whether an Accept-Encoding header takes gzip (and does
// not refuse it with q=0).
func Accepts(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.TrimSpace(name) != "*" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// MinSize is the smallest body Write compresses: below it gzip's header
// costs more than it saves.
const MinSize = 1024

// Write writes a 200 response of the given type, compressed when the
// request accepts gzip and the body is at least MinSize bytes.
func Write(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Add("Vary", "Accept-Encoding")
	if len(body) < MinSize || !Accepts(r.Header.Get("Accept-Encoding")) {
		w.Write(body)
		return
	}
	h.Set("Content-Encoding", "gzip")
	h.Del("Content-Length")
	z, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	z.Write(body)
	z.Close()
}
