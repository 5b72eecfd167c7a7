module github.com/refalloc/refalloc/bench

go 1.26.8

require (
	github.com/refalloc/refalloc v0.0.0
	modernc.org/memory v1.12.1
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/refalloc/refalloc => ../
