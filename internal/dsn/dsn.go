// Package dsn reads the strings that name a database (a SQLite file or a
// postgres:// URL) without opening anything: which backend one names, and
// how messages show it, never with its password. It links no SQL driver,
// so the runtime (package plane) can name a store it did not open.
//
//	dsn.IsPostgres("postgres://u:pw@db/x") // true
//	dsn.Redact("postgres://u:pw@db/x")     // "postgres://u:xxxxx@db/x"
package dsn

import (
	"net/url"
	"strings"
)

// IsPostgres reports whether db names a PostgreSQL database.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// Redact returns a PostgreSQL URL without its password, for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		scheme, rest, ok := strings.Cut(raw, "://")
		if i := strings.LastIndex(rest, "@"); ok && i >= 0 {
			return scheme + "://…@" + rest[i+1:] // unparsable: hide everything before the host
		}
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Password is the password in a PostgreSQL URL, or "".
func Password(db string) string {
	if !IsPostgres(db) {
		return ""
	}
	u, err := url.Parse(db)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}
