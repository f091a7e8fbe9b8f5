package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// keygen is `agentplane keygen`: a new random API key (32 bytes,
// base64url) and its SHA-256, for auth.keys — the key for its holder (or
// a key_env variable), the digest for key_sha256 in the configuration.
func (m *Main) keygen(_ context.Context, args []string) error {
	fs := m.flags("keygen", "")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	key := base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(key))
	fmt.Fprintf(m.Stdout, "key:        %s\nkey_sha256: %s\n", key, hex.EncodeToString(sum[:]))
	return nil
}
