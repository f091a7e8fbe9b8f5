package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/agentplane/agentplane"
)

// Configs is the optional ability of a store to keep configurations by
// their digest, so that every audit record's configuration (its config
// member) can be found again: replay decides each record on the
// configuration that decided it. Every store agentplane ships has it.
// Safe for concurrent use.
type Configs interface {
	// PutConfig keeps a configuration's canonical JSON (config.Canonical)
	// under its digest, the body's SHA-256 in hex: written once, a digest
	// kept already is left as it is (instances starting together, a
	// reload to a configuration that was in force before). A body that
	// does not digest to digest is an error with code invalid_input and
	// nothing is written.
	PutConfig(ctx context.Context, digest string, body []byte) error
	// Config returns the body kept under digest; false when none is.
	Config(ctx context.Context, digest string) ([]byte, bool, error)
}

// CheckConfig returns an error with code invalid_input when body does
// not digest to digest (PutConfig's check).
func CheckConfig(digest string, body []byte) error {
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != digest {
		return agentplane.Errorf(agentplane.CodeInvalidInput, "configuration %q: the body's SHA-256 is another", digest)
	}
	return nil
}
