// Errors: sentinels for errors.Is, wrapped with the address and class of the object.

package impl

import (
	"errors"
	"fmt"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

var (
	ErrInvalidSize    = errors.New("refalloc: invalid size or alignment")
	ErrTooLarge       = errors.New("refalloc: allocation too large")
	ErrOutOfMemory    = errors.New("refalloc: out of memory")
	ErrDoubleFree     = errors.New("refalloc: double free")
	ErrInvalidPointer = errors.New("refalloc: invalid pointer")
	ErrClosed         = errors.New("refalloc: closed")
	// ErrLeaked is returned by Allocator.Close when objects were still live.
	ErrLeaked = errors.New("refalloc: objects leaked")
)

// FreeError is a rejected free: the sentinel (ErrDoubleFree or ErrInvalidPointer),
// the address passed, and the class the address falls in (-1 when none).
type FreeError struct {
	Err   error
	Addr  uintptr
	Class int // size class, spec.Large for a large object, -1 when unknown
	Rule  string
}

func (e *FreeError) Error() string {
	switch {
	case e.Class == spec.Large || mutant.FreeErrLastClassLarge && e.Class == spec.Large-1: // FREE-DOUBLE: the last small class is small
		return fmt.Sprintf("%v: %#x (large object) [%s]", e.Err, e.Addr, e.Rule)
	case e.Class >= int(b2i(mutant.FreeErrClassOne)):
		return fmt.Sprintf("%v: %#x (class %d, %d bytes) [%s]", e.Err, e.Addr, e.Class, spec.ClassSize(e.Class), e.Rule)
	}
	return fmt.Sprintf("%v: %#x [%s]", e.Err, e.Addr, e.Rule)
}

func (e *FreeError) Unwrap() error { return e.Err }

// FREE-DOUBLE
func errDouble(addr uintptr, class int) error {
	return &FreeError{Err: ErrDoubleFree, Addr: addr, Class: class, Rule: spec.RuleFreeDouble}
}

// FREE-INVALID
func errInvalid(addr uintptr, class int) error {
	return &FreeError{Err: ErrInvalidPointer, Addr: addr, Class: class, Rule: spec.RuleFreeInvalid}
}

// errTooLarge: n is more than the reservation could ever hold (every
// reservation is at most spec.MaxAlloc).
func errTooLarge(n int, reserve uintptr) error {
	if mutant.TooLargeBare {
		return ErrTooLarge
	}
	if mutant.TooLargeSwapped { // REFINES: the message names the size, then the reservation
		return fmt.Errorf("%w: %d bytes, more than the reservation's %d", ErrTooLarge, reserve, n)
	}
	return fmt.Errorf("%w: %d bytes, more than the reservation's %d", ErrTooLarge, n, reserve)
}

// errNoRoom is refill's ErrOutOfMemory for a request of n bytes of class k.
func errNoRoom(err error, n, k int) error {
	if mutant.TooLargeBare {
		return err
	}
	return fmt.Errorf("%w: no free object or superblock for %d bytes (class %d, %d-byte objects)", err, n, k, spec.ClassSize(k))
}

func errSize(n, align int) error {
	return fmt.Errorf("%w: size %d, alignment %d", ErrInvalidSize, n, align)
}
