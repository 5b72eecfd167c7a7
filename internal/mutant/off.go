//go:build !refalloc_mutants

package mutant

// Active is the mutant this run has on: none, in a normal build.
func Active() string { return "" }

const (
	CapacityCredit       = false
	NoFlushDebit         = false
	CounterWrap          = false
	StaleSBCache         = false
	StaleOwner           = false
	LostRemote           = false
	RemoteIntoLocal      = false
	NoDoubleFreeCheck    = false
	NoZero               = false
	GenWrap              = false
	AdoptStale           = false
	PoisonBeforeTag      = false
	OOMNoFlush           = false
	LargeOOMNoFlush      = false
	PublishLate          = false
	CollectNoPublish     = false
	RelistFull           = false
	KeepEmpty            = false
	NoCoalesce           = false
	SkipExactRun         = false
	DecommitCount        = false
	RetainIgnored        = false
	TrimNoop             = false
	DirtyAsFresh         = false
	FreshFirst           = false
	KeepFull             = false
	LargeNoClear         = false
	LargeLiveBytes       = false
	OrphanCount          = false
	CloseMisses          = false
	RetiredInvalid       = false
	LeaksHeld            = false
	FrontFlushSkip       = false
	AlignIgnored         = false
	DebugNoVerify        = false
	DebugSiteWrong       = false
	ClosedAlloc          = false
	RemoteTail           = false
	LocalTail            = false
	StalePoolNil         = false
	AcquireNoInvalidate  = false
	HeldNotChecked       = false
	PendingNotChecked    = false
	PoisonWrongGroup     = false
	LeakCountLarge       = false
	LargeInterior        = false
	MissBatchShort       = false
	StampSameGen         = false
	NoRestamp            = false
	DropForward          = false
	NoDecay              = false
	ReallocNoZero        = false
	ReallocShortCopy     = false
	ReallocStaleSelf     = false
	LargeGrowDirty       = false
	LargeShrinkKeep      = false
	LargeGrowTaken       = false
	GuardNoProtect       = false
	QuarantineUnbounded  = false
	FrontNoToken         = false
	TokenLeak            = false
	FlushNoWait          = false
	PinnedRefillHeld     = false
	FillPinnedRS         = false
	QuarantinedPastEnd   = false
	FrontNoNotify        = false
	PinnedSampled        = false
	LargeGrowExact       = false
	OrphanFreedFull      = false
	NoReroute            = false
	RefillNoDrain        = false
	Ways16               = false
	DirtyScanShort       = false
	StaleOwnerFreed      = false
	CopyQuarantinedSrc   = false
	OrphanFullEntry      = false
	NoGrowthPurge        = false
	DirtyTopShort        = false
	SmallNoGrowthPurge   = false
	GrowthSlackCommitted = false
	GrowthNoRetain       = false
	PurgeLosesDecay      = false
	ReallocNoReserve     = false
	ReserveCleanupGap    = false
	GuardedNoReserve     = false
	GuardFlushLeft       = false
	QuarantineExactBound = false
	PendingBeforeTag     = false
	AdoptNotOwnerFreed   = false
	PinnedPublishLate    = false
	ReallocPanicLeak     = false
	CloseMarkShort       = false
	ResizeNoWait         = false
	ReleaseNoReroute     = false
	RemoteSkipsClosed    = false
	CloseWaysShort       = false
	RefillNoRetake       = false
	DecayNowGT           = false
	TimerNotCleared      = false
	PoolRunMarkAll       = false
	ResizeCapCheck       = false
	ReservedGuardAll     = false
	ResizeForeign        = false
	ResizableTail        = false
	HeapDecommitNoClear  = false
)

func Drop() bool { return false }
