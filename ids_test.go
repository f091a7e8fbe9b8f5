package agentplane_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
)

// Ordered ids sort in the order they were made (a millisecond apart or
// more), and look as random ids do: 32 hex digits, different each time.
func TestOrderedIDs(t *testing.T) {
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	prev := ""
	seen := map[string]bool{}
	for i := range 100 {
		id := agentplane.OrderedID(at.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q: want 32 hex digits", id)
		}
		if id <= prev {
			t.Fatalf("id %q made after %q sorts before it", id, prev)
		}
		same := agentplane.OrderedID(at.Add(time.Duration(i) * time.Millisecond))
		if seen[id] || seen[same] || same == id {
			t.Fatalf("ids repeat: %q %q", id, same)
		}
		seen[id], seen[same], prev = true, true, id
	}
}
