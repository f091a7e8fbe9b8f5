package dsn_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentplane/agentplane/internal/dsn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNames(t *testing.T) {
	for _, c := range []struct {
		name, db, shown, password string
		pg                        bool
	}{
		{"SQLite", "/var/lib/a.db", "/var/lib/a.db", "", false},
		{"PostgresPassword", "postgres://u:s3cret@db:5432/x?sslmode=disable", "postgres://u:xxxxx@db:5432/x?sslmode=disable", "s3cret", true},
		{"PostgresqlNoPassword", "postgresql://u@db/x", "postgresql://u@db/x", "", true},
		{"Unparsable", "postgres://u:s3%cret@db/x", "postgres://…@db/x", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := dsn.IsPostgres(c.db); got != c.pg {
				t.Errorf("IsPostgres = %v, want %v", got, c.pg)
			}
			shown := c.db
			if c.pg {
				shown = dsn.Redact(c.db)
			}
			if shown != c.shown {
				t.Errorf("Redact = %q, want %q", shown, c.shown)
			}
			if got := dsn.Password(c.db); got != c.password {
				t.Errorf("Password = %q, want %q", got, c.password)
			}
		})
	}
}
