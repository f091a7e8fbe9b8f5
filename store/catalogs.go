package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/agentplane/agentplane"
)

// CatalogVersions is the optional ability of a store to keep the answers
// of catalog providers by their version, so that every version a
// decision names (agentplane.Decision.Sources) can be found again:
// replay serves a record's provider reads from them instead of asking
// the provider. Every store agentplane ships has it. Safe for concurrent
// use.
type CatalogVersions interface {
	// PutCatalogVersion keeps an answer's items — their canonical JSON
	// (resolve.Versioned) — under its version, "sha256:" and the body's
	// SHA-256 in hex: written once, a version kept already is left as it
	// is (a provider answering the same items again, to several callers
	// or instances). A body that does not digest to version is an error
	// with code invalid_input and nothing is written.
	PutCatalogVersion(ctx context.Context, version string, body []byte) error
	// CatalogVersion returns the body kept under version; false when none
	// is.
	CatalogVersion(ctx context.Context, version string) ([]byte, bool, error)
}

// CheckCatalogVersion returns an error with code invalid_input when body
// does not digest to version (PutCatalogVersion's check).
func CheckCatalogVersion(version string, body []byte) error {
	sum := sha256.Sum256(body)
	if "sha256:"+hex.EncodeToString(sum[:]) != version {
		return agentplane.Errorf(agentplane.CodeInvalidInput, "catalog version %q: the body's SHA-256 is another (want \"sha256:\" and the hex SHA-256 of the body)", version)
	}
	return nil
}
