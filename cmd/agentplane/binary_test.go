package main

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// TestMain fails the tests when a goroutine they started is still running
// after them, and removes the binaries they built.
func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }
