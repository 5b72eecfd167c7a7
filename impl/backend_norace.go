//go:build !race

package impl

func defaultBackend() backend { return &mmapBackend{} }

const defaultReserve = 64 << 30
