package agentplane

import (
	"crypto/sha1"
	"encoding/hex"
)

// Mode is session-level behaviour state: which toolboxes (and so which
// catalogs, commands and tools) are active, and how the LLM should behave.
// Its fields are those of the mode catalog seed (TUL-010).
type Mode struct {
	Key                 string   // stable key used in sessions and tools, e.g. "ddr"
	ID                  string   // GUID without hyphens, 32 lowercase hex characters
	DisplayName         string   // human-readable name
	Description         string   // short explanation of the mode
	SystemPromptSummary string   // one paragraph on how prompts treat this mode
	Default             bool     // exactly one mode of a configuration is the default
	Aliases             []string // other names a user may type for this mode
	HumanRoleHints      []string // roles the mode is primarily suited for
	ExampleUtterances   []string // requests that clearly belong to this mode
	Toolboxes           []string // toolbox ids active in this mode
}

// modeNamespace is the UUID namespace (RFC 9562 name-based, SHA-1) under which
// mode ids are derived from mode keys. Changing it changes every derived id.
var modeNamespace = [16]byte{0x5d, 0x2a, 0x0c, 0x61, 0x8f, 0x3b, 0x4e, 0x7a, 0x9b, 0x44, 0x1c, 0x3e, 0x70, 0x12, 0xa9, 0x5f}

// ModeID derives the GUID (without hyphens) of a mode from its key: a
// version 5 UUID of the key in a fixed agentplane namespace. The same key
// always yields the same id.
func ModeID(key string) string {
	h := sha1.New()
	h.Write(modeNamespace[:])
	h.Write([]byte(key))
	var sum [20]byte
	h.Sum(sum[:0])
	u := sum[:16]
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return hex.EncodeToString(u)
}

// IsModeID reports whether s has the form of a mode id: 32 lowercase
// hexadecimal characters (a GUID without hyphens).
func IsModeID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
