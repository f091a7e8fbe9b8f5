// Package schemas embeds the JSON Schemas of the chat control protocol:
// intent, state_snapshot, execution_result and the router's decision, and
// the invocation context tools receive (draft 2020-12).
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed *.schema.json
var files embed.FS

// Names of the published schemas.
const (
	Intent          = "intent"
	Decision        = "decision"
	StateSnapshot   = "state_snapshot"
	ExecutionResult = "execution_result"
	// InvocationContext is what a tool is told about a call besides its
	// arguments (agentplane.InvocationContext).
	InvocationContext = "invocation_context"
)

// Names lists the published schemas.
var Names = []string{Intent, StateSnapshot, ExecutionResult, Decision, InvocationContext}

// File returns a published schema's JSON by name.
func File(name string) ([]byte, error) { return files.ReadFile(name + ".schema.json") }

// Set is the compiled schemas. Safe for concurrent use.
type Set struct {
	schemas map[string]*jsonschema.Schema
}

// Compile compiles every published schema.
func Compile() (*Set, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	set := &Set{schemas: map[string]*jsonschema.Schema{}}
	for _, name := range Names {
		file := name + ".schema.json"
		b, err := files.ReadFile(file)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", file, err)
		}
		if err := c.AddResource(file, doc); err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", file, err)
		}
		s, err := c.Compile(file)
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", file, err)
		}
		set.schemas[name] = s
	}
	return set, nil
}

// Validate checks v's JSON encoding against the named schema.
func (s *Set) Validate(name string, v any) error {
	sch, ok := s.schemas[name]
	if !ok {
		return fmt.Errorf("schemas: no schema %q", name)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("schemas: encode %s: %w", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("schemas: decode %s: %w", name, err)
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("%s does not match its schema: %w\n%s", name, err, b)
	}
	return nil
}
