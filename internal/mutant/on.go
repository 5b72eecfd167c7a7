//go:build refalloc_mutants

package mutant

import (
	"fmt"
	"os"
	"slices"
	"sync/atomic"
)

var active = os.Getenv(Env)

func init() {
	if active != "" && !slices.ContainsFunc(All, func(m Mutant) bool { return m.Name == active }) {
		panic(fmt.Sprintf("%s=%s: no such mutant", Env, active))
	}
}

// Active is the mutant this run has on, or "".
func Active() string { return active }

func on(name string) bool { return active == name }

var (
	CapacityCredit       = on("capacitycredit")
	NoFlushDebit         = on("noflushdebit")
	CounterWrap          = on("counterwrap")
	StaleSBCache         = on("stalesbcache")
	StaleOwner           = on("staleowner")
	LostRemote           = on("lostremote")
	RemoteIntoLocal      = on("remoteintolocal")
	NoDoubleFreeCheck    = on("nodoublefreecheck")
	NoZero               = on("nozero")
	GenWrap              = on("genwrap")
	AdoptStale           = on("adoptstale")
	PoisonBeforeTag      = on("poisonbeforetag")
	OOMNoFlush           = on("oomnoflush")
	LargeOOMNoFlush      = on("largeoomnoflush")
	PublishLate          = on("publishlate")
	CollectNoPublish     = on("collectnopublish")
	RelistFull           = on("relistfull")
	KeepEmpty            = on("keepempty")
	NoCoalesce           = on("nocoalesce")
	SkipExactRun         = on("skipexactrun")
	DecommitCount        = on("decommitcount")
	RetainIgnored        = on("retainignored")
	TrimNoop             = on("trimnoop")
	DirtyAsFresh         = on("dirtyasfresh")
	FreshFirst           = on("freshfirst")
	KeepFull             = on("keepfull")
	LargeNoClear         = on("largenoclear")
	LargeLiveBytes       = on("largelivebytes")
	OrphanCount          = on("orphancount")
	CloseMisses          = on("closemisses")
	RetiredInvalid       = on("retiredinvalid")
	LeaksHeld            = on("leaksheld")
	FrontFlushSkip       = on("frontflushskip")
	AlignIgnored         = on("alignignored")
	DebugNoVerify        = on("debugnoverify")
	DebugSiteWrong       = on("debugsitewrong")
	ClosedAlloc          = on("closedalloc")
	RemoteTail           = on("remotetail")
	LocalTail            = on("localtail")
	StalePoolNil         = on("stalepoolnil")
	AcquireNoInvalidate  = on("acquirenoinvalidate")
	HeldNotChecked       = on("heldnotchecked")
	PendingNotChecked    = on("pendingnotchecked")
	PoisonWrongGroup     = on("poisonwronggroup")
	LeakCountLarge       = on("leakcountlarge")
	LargeInterior        = on("largeinterior")
	MissBatchShort       = on("missbatchshort")
	StampSameGen         = on("stampsamegen")
	NoRestamp            = on("norestamp")
	DropForward          = on("dropforward")
	NoDecay              = on("nodecay")
	ReallocNoZero        = on("reallocnozero")
	ReallocShortCopy     = on("reallocshortcopy")
	ReallocStaleSelf     = on("reallocstaleself")
	LargeGrowDirty       = on("largegrowdirty")
	LargeShrinkKeep      = on("largeshrinkkeep")
	LargeGrowTaken       = on("largegrowtaken")
	GuardNoProtect       = on("guardnoprotect")
	QuarantineUnbounded  = on("quarantineunbounded")
	FrontNoToken         = on("frontnotoken")
	TokenLeak            = on("tokenleak")
	FlushNoWait          = on("flushnowait")
	PinnedRefillHeld     = on("pinnedrefillheld")
	FillPinnedRS         = on("fillpinnedrs")
	QuarantinedPastEnd   = on("quarantinedpastend")
	FrontNoNotify        = on("frontnonotify")
	PinnedSampled        = on("pinnedsampled")
	LargeGrowExact       = on("largegrowexact")
	OrphanFreedFull      = on("orphanfreedfull")
	NoReroute            = on("noreroute")
	RefillNoDrain        = on("refillnodrain")
	Ways16               = on("ways16")
	DirtyScanShort       = on("dirtyscanshort")
	StaleOwnerFreed      = on("staleownerfreed")
	CopyQuarantinedSrc   = on("copyquarantinedsrc")
	OrphanFullEntry      = on("orphanfullentry")
	NoGrowthPurge        = on("nogrowthpurge")
	DirtyTopShort        = on("dirtytopshort")
	SmallNoGrowthPurge   = on("smallnogrowthpurge")
	GrowthSlackCommitted = on("growthslackcommitted")
	GrowthNoRetain       = on("growthnoretain")
	PurgeLosesDecay      = on("purgelosesdecay")
	ReallocNoReserve     = on("reallocnoreserve")
	ReserveCleanupGap    = on("reservegap")
	GuardedNoReserve     = on("guardednoreserve")
	GuardFlushLeft       = on("guardflushleft")
	QuarantineExactBound = on("quarantineexact")
	PendingBeforeTag     = on("pendingbeforetag")
	AdoptNotOwnerFreed   = on("adoptnotownerfreed")
	PinnedPublishLate    = on("pinnedpublishlate")
	ReallocPanicLeak     = on("reallocpanicleak")
	CloseMarkShort       = on("closemarkshort")
	ResizeNoWait         = on("resizenowait")
	ReleaseNoReroute     = on("releasenoreroute")
	RemoteSkipsClosed    = on("remoteskipsclosed")
	CloseWaysShort       = on("closewaysshort")
	RefillNoRetake       = on("refillnoretake")
	DecayNowGT           = on("decaynowgt")
	TimerNotCleared      = on("timernotcleared")
	PoolRunMarkAll       = on("poolrunmarkall")
	ResizeCapCheck       = on("resizecapcheck")
	ReservedGuardAll     = on("reservedguardall")
	ResizeForeign        = on("resizeforeign")
	ResizableTail        = on("resizabletail")
	HeapDecommitNoClear  = on("heapdecommitnoclear")
)

var remoteFrees atomic.Uint64

// Drop reports whether this remote free is the one in 64 that lostremote loses.
func Drop() bool { return remoteFrees.Add(1)%64 == 0 }
