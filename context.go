package agentplane

import "slices"

// ActiveWorkContext (AWC) is the authoritative description of what the
// session is working on. It changes only through the declared effects of
// commands and tools, never through the LLM.
//
// Invariants: if Entity is set, EntityType is set; every related entity has
// an entity type, an id and a role.
type ActiveWorkContext struct {
	Domain          string             `json:"domain,omitempty"`
	EntityType      string             `json:"entity_type,omitempty"`
	Entity          *EntityHeader      `json:"entity_header,omitempty"`
	RelatedEntities []RelatedEntityRef `json:"related_entities,omitempty"`
}

// IsZero reports whether nothing is active.
func (c ActiveWorkContext) IsZero() bool {
	return c.Domain == "" && c.EntityType == "" && c.Entity == nil && len(c.RelatedEntities) == 0
}

// Clone returns a deep copy.
func (c ActiveWorkContext) Clone() ActiveWorkContext {
	if c.Entity != nil {
		e := *c.Entity
		c.Entity = &e
	}
	c.RelatedEntities = slices.Clone(c.RelatedEntities)
	return c
}

// Validate checks the AWC invariants of the ACP seed.
func (c ActiveWorkContext) Validate() error {
	if c.Entity != nil && c.EntityType == "" {
		return Errorf(CodeInvalidState, "active work context: entity %q has no entity type", c.Entity.ID)
	}
	if c.Entity != nil && c.Entity.ID == "" {
		return Errorf(CodeInvalidState, "active work context: entity header has no id")
	}
	for i, r := range c.RelatedEntities {
		if r.EntityType == "" || r.Header.ID == "" || r.Role == "" {
			return Errorf(CodeInvalidState, "active work context: related entity %d needs entity_type, id and role", i)
		}
	}
	return nil
}
