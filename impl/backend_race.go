//go:build race

package impl

// In -race builds the payload lives on the Go heap so the detector sees races on it.
func defaultBackend() backend { return &heapBackend{} }

const defaultReserve = heapDefaultReserve
