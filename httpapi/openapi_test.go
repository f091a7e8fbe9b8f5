package httpapi_test

import (
	"net/http"
	"testing"
)

func validatingClient(t *testing.T, c *http.Client) *http.Client { return c }
