package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CompileSchema compiles a JSON Schema given as decoded JSON (or YAML).
func CompileSchema(name string, schema map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "mem://" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// CheckObjectSchema reports whether schema compiles and describes JSON
// objects ("type": "object"), as a tool's input schema must.
func CheckObjectSchema(schema map[string]any) error {
	_, err := CompileObjectSchema("input", schema)
	return err
}

// CompileObjectSchema compiles schema under name once it is an object
// schema ("type": "object"), as a tool's input schema must be.
func CompileObjectSchema(name string, schema map[string]any) (*jsonschema.Schema, error) {
	if t, _ := schema["type"].(string); t != "object" {
		return nil, errors.New(`must be an object schema ("type": "object")`)
	}
	s, err := CompileSchema(name, schema)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %v", err)
	}
	return s, nil
}
