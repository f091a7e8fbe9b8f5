package agentplane

import (
	"crypto/rand"
	"encoding/hex"
)

// RandomID returns 16 random bytes in hex: the default id source of every
// part that makes ids (sessions, requests, tokens, notifications,
// workflows). Each takes its source as an option, so that tests and
// replays inject their own and get exact ids.
func RandomID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
