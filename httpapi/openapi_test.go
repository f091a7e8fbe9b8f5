package httpapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane/docs"
	"github.com/agentplane/agentplane/httpapi"
)

var update = flag.Bool("update", false, "rebuild docs/openapi.json")

// The committed document is what its source and the schemas build.
func TestOpenAPIDocument(t *testing.T) {
	built, err := httpapi.BuildOpenAPI(docs.OpenAPISource)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("../docs/openapi.json", built, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(built, docs.OpenAPI) {
		t.Fatal("docs/openapi.json is not current: go test ./httpapi -run TestOpenAPIDocument -update")
	}
	doc, err := libopenapi.NewDocument(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Error(describe(verrs))
	}
}

// The document lists exactly the routes the server serves.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	e := newEnv(t, nil)
	var spec struct {
		Paths map[string]map[string]any
	}
	if err := json.Unmarshal(docs.OpenAPI, &spec); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range spec.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	var served []string
	for _, p := range append(e.api.Patterns(), "/mcp") {
		if !strings.Contains(p, " ") { // all methods: the document lists those that answer
			for _, m := range []string{"GET", "POST", "DELETE"} {
				served = append(served, m+" "+p)
			}
			continue
		}
		served = append(served, p)
	}
	slices.Sort(documented)
	served = slices.Compact(slices.Sorted(slices.Values(served)))
	if !slices.Equal(documented, served) {
		t.Fatalf("documented:\n%s\nserved:\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
}

var (
	specOnce         sync.Once
	specV            validator.Validator
	eventSch         *jsonschema.Schema
	workflowEventSch *jsonschema.Schema
	specErr          error
)

// spec returns the validator of the committed document, and the compiled
// schema of an event (for the data of SSE events).
func spec(t testing.TB) (validator.Validator, *jsonschema.Schema) {
	t.Helper()
	specOnce.Do(func() {
		doc, err := libopenapi.NewDocument(docs.OpenAPI)
		if err != nil {
			specErr = err
			return
		}
		var errs []error
		specV, errs = validator.NewValidator(doc)
		if len(errs) > 0 {
			specErr = errs[0]
			return
		}
		c := jsonschema.NewCompiler()
		raw, _ := jsonschema.UnmarshalJSON(bytes.NewReader(docs.OpenAPI))
		if specErr = c.AddResource("https://agentplane.dev/openapi.json", raw); specErr != nil {
			return
		}
		if eventSch, specErr = c.Compile("https://agentplane.dev/openapi.json#/components/schemas/Event"); specErr != nil {
			return
		}
		workflowEventSch, specErr = c.Compile("https://agentplane.dev/openapi.json#/components/schemas/WorkflowEvent")
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return specV, eventSch
}

// checkEvent validates an SSE event's data against the Event schema, or
// a workflow's (which has a workflow_id) against WorkflowEvent.
func checkEvent(t *testing.T, data string) {
	t.Helper()
	_, sch := spec(t)
	var probe map[string]json.RawMessage
	if json.Unmarshal([]byte(data), &probe) == nil && probe["workflow_id"] != nil {
		sch = workflowEventSch
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(data))
	if err == nil {
		err = sch.Validate(v)
	}
	if err != nil {
		t.Errorf("event %s: %v", data, err)
	}
}

// validatingClient checks every request it sends and every response it
// gets against the OpenAPI document (a stream's status and headers; its
// events are checked by checkEvent).
func validatingClient(t testing.TB, c *http.Client) *http.Client {
	v, _ := spec(t)
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	return &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body.Close()
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		check := req.Clone(req.Context())
		check.Body = io.NopCloser(bytes.NewReader(body))
		if ok, errs := v.ValidateHttpRequest(check); !ok && resp.StatusCode < 400 {
			t.Errorf("%s %s: the request does not match the OpenAPI document: %s", req.Method, req.URL.Path, describe(errs))
		}
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			return resp, nil
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		copyResp := *resp
		copyResp.Body = io.NopCloser(bytes.NewReader(raw))
		check.Body = io.NopCloser(bytes.NewReader(body))
		if ok, errs := v.ValidateHttpResponse(check, &copyResp); !ok && !undocumented(errs, resp.StatusCode) {
			t.Errorf("%s %s: the %d response does not match the OpenAPI document: %s\n%s", req.Method, req.URL.Path, resp.StatusCode, describe(errs), truncated(raw))
		}
		return resp, nil
	})}
}

// undocumented reports a 404 or 405 for a path or method the document
// does not have: that is the test of an absent endpoint.
func undocumented(errs []*verrors.ValidationError, status int) bool {
	return (status == 404 || status == 405) && len(errs) == 1 && errs[0].ValidationType == "path"
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Message + ": " + e.Reason)
		for _, s := range e.SchemaValidationErrors {
			b.WriteString("; " + s.FieldPath + " " + s.KeywordLocation + " " + s.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func truncated(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
