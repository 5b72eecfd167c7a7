package invariants_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/invariants"
)

// gates holds chosen Free and Realloc calls of a Shared in flight (its hook):
// hold(x, at) makes the next call on x that reaches at wait there until the
// gate's release is closed.
type gates struct {
	mu      sync.Mutex
	pending map[gateKey][]*gate
}

type gateKey struct {
	x  uintptr
	at invariants.HookPoint
}

type gate struct {
	reached, release chan struct{}
}

func newGates(sh *invariants.Shared) *gates {
	g := &gates{pending: map[gateKey][]*gate{}}
	sh.SetHook(func(at invariants.HookPoint, x uintptr) {
		k := gateKey{x, at}
		g.mu.Lock()
		q := g.pending[k]
		if len(q) == 0 {
			g.mu.Unlock()
			return
		}
		h := q[0]
		g.pending[k] = q[1:]
		g.mu.Unlock()
		close(h.reached)
		<-h.release
	})
	return g
}

// hold arms a gate for the next call on x reaching at.
func (g *gates) hold(x uintptr, at invariants.HookPoint) *gate {
	h := &gate{reached: make(chan struct{}), release: make(chan struct{})}
	g.mu.Lock()
	g.pending[gateKey{x, at}] = append(g.pending[gateKey{x, at}], h)
	g.mu.Unlock()
	return h
}

// async runs f on its own goroutine; the returned channel closes when it ends.
func async(f func()) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func report(t *testing.T, sh *invariants.Shared) {
	t.Helper()
	for _, v := range sh.Violations() {
		t.Errorf("%s: %s", v.Rule, v.Detail)
	}
}

func alloc(t *testing.T, sh *invariants.Shared, id, n int, fill byte) invariants.SharedObj {
	t.Helper()
	o, ok := sh.Alloc(nil, id, n, 1, fill)
	if !ok {
		t.Fatalf("Alloc(%d) failed", n)
	}
	return o
}
