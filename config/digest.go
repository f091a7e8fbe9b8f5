package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/agentplane/agentplane/internal/canonjson"
)

// Canonical returns the configuration as it was parsed, in canonical JSON
// (RFC 8785): the Go field names of Config and the domain types, members
// sorted, no whitespace. Two files that differ only in layout, comments,
// key order or defaults written out give the same bytes; the bytes hold
// no secret (headers_env names variables, auth keys are digests or
// variable names). FromCanonical reads them back.
func Canonical(cfg *Config) ([]byte, error) {
	b, err := canonjson.AppendValue(nil, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("config: canonical form: %w", err)
	}
	return b, nil
}

// Digest names a configuration: the SHA-256 (hex) of its canonical JSON
// (Canonical). Every audit record of a decision or an execution carries
// the digest of the configuration that decided it, and stores keep the
// configurations by it.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// ShortDigest is how people are shown a digest: its first 12 hex digits.
func ShortDigest(digest string) string {
	return digest[:min(len(digest), 12)]
}

// FromCanonical reads a configuration written by Canonical (one a store
// kept) back. It checks only that it is one: the configuration was
// validated when it was in force.
func FromCanonical(b []byte) (*Config, error) {
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("config: a stored configuration that does not read back: %w", err)
	}
	if len(cfg.Modes) == 0 {
		return nil, fmt.Errorf("config: a stored configuration without modes")
	}
	return &cfg, nil
}
