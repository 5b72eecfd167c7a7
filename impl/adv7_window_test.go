//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestSnapshotShowsCountedUsers (FRONT-EXCLUSIVE): the refalloc_yield build
// (like refalloc_check) counts the calls using each front cache, and a
// snapshot shows each count as it is, so that the quiescent check (no call
// counted) can see one left counted. While WithFrontCache uses a front cache,
// exactly one front cache shows one call; afterwards none does. In this
// build's file so that internal/yieldbuild runs it from the default build's
// go test ./... (the default build counts nothing). Slip: snapnousers (the
// snapshot shows Users as 0 always, and the check sees nothing).
func TestSnapshotShowsCountedUsers(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	var users []int32
	a.WithFrontCache(0, func(*impl.Cache) {
		for _, c := range a.Snapshot().Caches {
			if c.Front && c.Users != 0 {
				users = append(users, c.Users)
			}
		}
	})
	if len(users) != 1 || users[0] != 1 {
		t.Fatalf("front caches counting calls while WithFrontCache uses one: %v, want one counting 1", users)
	}
	for _, c := range a.Snapshot().Caches {
		if c.Users != 0 {
			t.Fatalf("cache %d: %d calls counted after WithFrontCache", c.ID, c.Users)
		}
	}
}
