package gate

import (
	"encoding/json"
	"fmt"

	"github.com/wI2L/jsondiff"

	"github.com/agentplane/agentplane"
)

// stateDiff returns the RFC 6902 patch from one session state to another;
// an empty, non-nil slice when they are equal.
func stateDiff(before, after *agentplane.Session) ([]agentplane.PatchOp, error) {
	patch, err := jsondiff.Compare(before, after)
	if err != nil {
		return nil, fmt.Errorf("gate: state diff: %w", err)
	}
	ops := []agentplane.PatchOp{}
	if len(patch) == 0 {
		return ops, nil
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("gate: state diff: %w", err)
	}
	if err := json.Unmarshal(b, &ops); err != nil {
		return nil, fmt.Errorf("gate: state diff: %w", err)
	}
	return ops, nil
}
