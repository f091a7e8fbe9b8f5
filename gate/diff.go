package gate

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentplane/agentplane"
)

// stateDiff returns the RFC 6902 patch from one session state to another,
// member by member of the session's JSON form (and of its active work
// context); an empty, non-nil slice when they are equal. It knows the
// session's shape, so it compares typed values and encodes only what
// changed — a generic JSON diff cost more than the rest of an execution.
func stateDiff(before, after *agentplane.Session) ([]agentplane.PatchOp, error) {
	ops := []agentplane.PatchOp{}
	var err error
	member := func(path string, wasSet, isSet, equal bool, value any) {
		if err != nil || equal && wasSet == isSet {
			return
		}
		op := agentplane.PatchOp{Op: "replace", Path: path}
		switch {
		case !wasSet && !isSet:
			return
		case !isSet:
			op.Op = "remove"
			ops = append(ops, op)
			return
		case !wasSet:
			op.Op = "add"
		}
		if op.Value, err = json.Marshal(value); err == nil {
			ops = append(ops, op)
		}
	}
	ba, aa := &before.AWC, &after.AWC
	member("/id", true, true, before.ID == after.ID, after.ID)
	member("/mode", true, true, before.Mode == after.Mode, after.Mode)
	member("/awc/domain", ba.Domain != "", aa.Domain != "", ba.Domain == aa.Domain, aa.Domain)
	member("/awc/entity_type", ba.EntityType != "", aa.EntityType != "", ba.EntityType == aa.EntityType, aa.EntityType)
	member("/awc/entity_header", ba.Entity != nil, aa.Entity != nil,
		ba.Entity == nil || aa.Entity == nil || *ba.Entity == *aa.Entity, aa.Entity)
	member("/awc/related_entities", len(ba.RelatedEntities) > 0, len(aa.RelatedEntities) > 0,
		slices.Equal(ba.RelatedEntities, aa.RelatedEntities), aa.RelatedEntities)
	member("/pending_picker", before.PendingPicker != nil, after.PendingPicker != nil,
		equalPicker(before.PendingPicker, after.PendingPicker), after.PendingPicker)
	member("/pending_confirmation", before.PendingConfirmation != nil, after.PendingConfirmation != nil,
		equalConfirm(before.PendingConfirmation, after.PendingConfirmation),
		after.PendingConfirmation)
	member("/version", true, true, before.Version == after.Version, after.Version)
	if err != nil {
		return nil, fmt.Errorf("gate: state diff: %w", err)
	}
	return ops, nil
}
