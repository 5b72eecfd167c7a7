//go:build !refalloc_mutants

package mutant

// Active is the mutant this run has on: none, in a normal build.
func Active() string { return "" }

const (
	CapacityCredit    = false
	NoFlushDebit      = false
	CounterWrap       = false
	StaleSBCache      = false
	StaleOwner        = false
	LostRemote        = false
	RemoteIntoLocal   = false
	NoDoubleFreeCheck = false
	NoZero            = false
	GenWrap           = false
	AdoptStale        = false
	PoisonBeforeTag   = false
	OOMNoFlush        = false
	LargeOOMNoFlush   = false
	FrontNoToken      = false
	TokenLeak         = false
	FlushNoWait       = false
)

func Drop() bool { return false }
