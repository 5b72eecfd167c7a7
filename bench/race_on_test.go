//go:build race

package bench

// raceBuild: under -race on a loaded machine a short timed window can end
// before the first xmalloc-test batch is freed, so "nothing measured" is not
// a failure there.
const raceBuild = true
