package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/config"
)

// TestDigestIgnoresLayout: a file written another way (comments, key
// order, quoting, a default written out) has the same digest; a change
// of meaning has another; the canonical form reads back to the same
// configuration.
func TestDigestIgnoresLayout(t *testing.T) {
	a := `version: 1
modes:
  - key: general
    display_name: General
    default: true
commands: []
`
	b := `# the same, laid out otherwise
commands: []
version: 1
modes:
- {default: true, display_name: "General", key: general}
`
	c := strings.Replace(a, "General", "Everything", 1)
	digest := func(src string) (string, *config.Config) {
		t.Helper()
		cfg, err := config.Parse([]byte(src), "x.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return config.Digest(roundTrip(t, "x.yaml", cfg)), cfg
	}
	da, _ := digest(a)
	db, _ := digest(b)
	dc, _ := digest(c)
	if da != db {
		t.Errorf("layout changed the digest: %s vs %s", da, db)
	}
	if da == dc {
		t.Errorf("a changed display name kept the digest %s", da)
	}
	if len(da) != 64 || config.ShortDigest(da) != da[:12] {
		t.Errorf("digest %q", da)
	}
}

// TestDigestOfExamples: the shipped configurations read back whole.
func TestDigestOfExamples(t *testing.T) {
	for _, p := range []string{"../examples/helpdesk/agentplane.yaml", "../examples/library/agentplane.yaml", "../examples/media/agentplane.yaml"} {
		cfg, err := config.Load(p, &config.Options{Programs: []string{"outbox"}})
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, p, cfg)
	}
}

// roundTrip writes cfg in its canonical form, reads it back, and fails the
// test unless the configuration read back is cfg whole; it returns the form.
func roundTrip(t *testing.T, name string, cfg *config.Config) []byte {
	t.Helper()
	canon, err := config.Canonical(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.FromCanonical(canon)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, back) {
		t.Errorf("%s: the canonical form does not read back to the same configuration:\n%+v\n%+v", name, cfg, back)
	}
	return canon
}
