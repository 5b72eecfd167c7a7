//go:build !race

package invariants_test

const raceEnabled = false
