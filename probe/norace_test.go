//go:build !race

package probe_test

const raceEnabled = false
