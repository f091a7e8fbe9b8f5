//go:build race

package probe_test

// raceEnabled is set when the race detector is on: the probe of the
// shipped configurations then uses fewer phrasings, as the detector makes
// routing some ten times slower.
const raceEnabled = true
