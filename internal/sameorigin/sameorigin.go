// Package sameorigin makes HTTP clients that follow redirects only within
// the origin (scheme, host and port) of the request they started with.
// Configured headers (API keys) and a POST's body must never reach another
// host because a server answered 307: Go's client would re-send the body
// and every header it does not know to be secret.
package sameorigin

import (
	"fmt"
	"net/http"
)

// maxRedirects is how many redirects within the origin are followed.
const maxRedirects = 10

// Client returns a copy of c (http.DefaultClient when nil) that refuses a
// redirect to another origin: the request fails, naming where it was sent.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	next := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return fmt.Errorf("refused a redirect from %s://%s to another origin, %s://%s", first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &cp
}
