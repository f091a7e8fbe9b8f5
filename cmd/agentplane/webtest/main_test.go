package webtest

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }
