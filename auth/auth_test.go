package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/config"
)

func digest(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}

func TestKeys(t *testing.T) {
	env := map[string]string{"BOB_KEY": "bob-key-0123456789"}
	keys, err := auth.New(config.Auth{Keys: []config.APIKey{
		{UserID: "alice", Roles: []string{"admin"}, KeySHA256: digest("alice-key-0123456789")},
		{UserID: "bob", KeyEnv: "BOB_KEY"},
	}}, func(k string) string { return env[k] })
	if err != nil || keys.Len() != 2 {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		"Bearer alice-key-0123456789": "alice",
		"bearer bob-key-0123456789":   "bob",
	} {
		p, err := keys.Authenticate(header)
		if err != nil || p.ID != want {
			t.Errorf("%q: %+v %v", header, p, err)
		}
	}
	if p, _ := keys.Authenticate("Bearer alice-key-0123456789"); len(p.Roles) != 1 || p.Roles[0] != "admin" {
		t.Fatalf("%+v", p)
	}
	for header, want := range map[string]string{
		"":                           "missing API key",
		"Bearer":                     "not \"Bearer KEY\"",
		"Basic YWxpY2U6eA==":         "not \"Bearer KEY\"",
		"Bearer wrong-key-012345678": "unknown API key",
	} {
		_, err := keys.Authenticate(header)
		if agentplane.ErrorCode(err) != agentplane.CodeUnauthorized || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", header, err, want)
		}
		if strings.Contains(err.Error(), "wrong-key") {
			t.Errorf("the key is in the error: %v", err)
		}
	}
	// no keys: everyone is the local principal
	none, _ := auth.New(config.Auth{}, nil)
	if p, err := none.Authenticate(""); err != nil || p.ID != agentplane.LocalPrincipal {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestBadKeys(t *testing.T) {
	get := func(k string) string { return map[string]string{"SHORT": "abc"}[k] }
	for _, c := range []struct {
		keys []config.APIKey
		want string
	}{
		{[]config.APIKey{{UserID: "a", KeyEnv: "UNSET"}}, "environment variable UNSET is not set"},
		{[]config.APIKey{{UserID: "a", KeyEnv: "SHORT"}}, "shorter than 16 characters"},
		{[]config.APIKey{{UserID: "a", KeySHA256: "zz"}}, "not a SHA-256 digest"},
		{[]config.APIKey{{UserID: "a", KeySHA256: digest("k")}, {UserID: "b", KeySHA256: digest("k")}}, "the same key as an earlier entry"},
	} {
		if _, err := auth.New(config.Auth{Keys: c.keys}, get); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.keys, err, c.want)
		}
	}
}
