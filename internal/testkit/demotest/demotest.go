// Package demotest builds the runtime on the embedded demo configuration
// for tests: the demo's programs, an in-memory store, a clock that moves one
// second per reading from a fixed start, and sequential ids and tokens.
package demotest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
)

// Start is when the clock starts.
var Start = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// Core returns the demo runtime, closed when the test ends. Fields set in
// opts replace the defaults; opts may be nil.
func Core(tb testing.TB, opts *core.Options) *core.Core {
	tb.Helper()
	return WithYAML(tb, demo.YAML, opts)
}

// WithYAML is Core on a changed demo configuration.
func WithYAML(tb testing.TB, yaml []byte, opts *core.Options) *core.Core {
	tb.Helper()
	o := Options(opts)
	c, err := core.New(context.Background(), core.Source{YAML: yaml, Name: demo.Name}, &o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Options returns opts (nil: none) with the test defaults where it sets
// nothing: the clock that moves one second per reading, sequential ids and
// tokens, the demo's programs.
func Options(opts *core.Options) core.Options {
	o := core.Options{}
	if opts != nil {
		o = *opts
	}
	var mu sync.Mutex // the sources are safe for concurrent use
	if o.Now == nil {
		clock := Start
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock }
	}
	if o.NewID == nil {
		n := 0
		o.NewID = func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("id-%d", n) }
	}
	if o.NewToken == nil {
		n := 0
		o.NewToken = func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("tok-%d", n) }
	}
	if o.Programs == nil {
		o.Programs = demo.Programs(o.Now)
	}
	return o
}

// Runtime opens the runtime (package plane) for a test, closed when it
// ends: o.Config defaults to the demo configuration, o.Core's unset
// fields to Options', and o.OpenStore to drivers.Open.
func Runtime(tb testing.TB, o plane.Options) *plane.Runtime {
	tb.Helper()
	if o.Config.Path == "" && o.Config.YAML == nil {
		o.Config = core.Source{YAML: demo.YAML, Name: demo.Name}
	}
	o.Core = Options(&o.Core)
	if o.OpenStore == nil {
		o.OpenStore = drivers.Open
	}
	rt, err := plane.Open(context.Background(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(5 * time.Second) })
	return rt
}
