package demo

import "testing"

func TestDemoConfigIsValid(t *testing.T) {
	t.Parallel()
	cfg, err := Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultMode().Key != "general" || len(cfg.Modes) != 3 {
		t.Fatalf("modes = %+v", cfg.Modes)
	}
}
