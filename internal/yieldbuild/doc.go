// Package yieldbuild has no code: its test runs, from the README's test command
// (go test ./..., the default build), the tests that need the refalloc_yield
// build, in that build. Those are the race-window tests (a goroutine paused at
// one yield point while another acts) and the interleaving explorer's seeds:
// in the default build the yield points compile to nothing, so without this a
// bug that only shows inside an operation's race window would pass the
// README's command and be seen only by CI's separate refalloc_yield step.
// Its other test does the same for the refalloc_check build's own tests
// (impl/check_on_test.go: the check build's assertions must fire), since no
// other build compiles impl/check_on.go. Two more run whole suites in the
// builds no other step of the README's command compiles: refalloc_portable
// (impl's and invariants', the front without per-P caches) and
// refalloc_nostats (impl's and fuzz's, the class counters compiled out).
package yieldbuild
