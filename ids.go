package agentplane

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// RandomID returns 16 random bytes in hex: the default id source of the
// parts that make ids (sessions, requests, tokens, notifications;
// workflows default to OrderedID). Each takes its source as an
// option, so that tests and replays inject their own and get exact ids.
func RandomID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// OrderedID returns an id made at now that looks as RandomID's do (32
// hex digits), of which the first 12 are now in Unix milliseconds and the
// other 20 random (80 bits). Ids made one after another sort one after
// another, and so do the rows a database keys by them: a commit adds to a
// B-tree's last pages, where random ids split pages all over it. It is
// the default of workflow ids, whose rows a run writes several times;
// such an id tells when it was made.
func OrderedID(now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	rand.Read(b[6:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
