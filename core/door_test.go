package core_test

import (
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/mcpclient"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
)

// TestOneDoor: neither the core nor a view of its configuration hands out
// the gate, the store, the tool registry, a tool (whose Call runs it
// around the gate) or an MCP server (whose tools do): a session is written through the core's methods only.
// (The router it hands out is pure: it decides and records nothing.)
func TestOneDoor(t *testing.T) {
	forbidden := []reflect.Type{
		reflect.TypeFor[*gate.Gate](), reflect.TypeFor[store.Store](), reflect.TypeFor[*tool.Registry](), reflect.TypeFor[tool.Tool](),
		reflect.TypeFor[*mcpclient.Server](), // its Tools run around the gate
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[*core.Core](), reflect.TypeFor[core.View]()} {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			for j := range m.Type.NumOut() {
				out := m.Type.Out(j)
				for out.Kind() == reflect.Slice || out.Kind() == reflect.Map {
					out = out.Elem()
				}
				for _, f := range forbidden {
					if out == f || out.Kind() == reflect.Struct && hasField(out, f) {
						t.Errorf("%s.%s hands out %s", typ, m.Name, f)
					}
				}
			}
		}
	}
}

// hasField reports whether a struct has an exported field of type f.
func hasField(s reflect.Type, f reflect.Type) bool {
	for i := range s.NumField() {
		if fl := s.Field(i); fl.IsExported() && fl.Type == f {
			return true
		}
	}
	return false
}
