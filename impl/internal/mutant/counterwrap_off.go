//go:build !refalloc_mutant_counterwrap

package mutant

const CounterWrap = false
