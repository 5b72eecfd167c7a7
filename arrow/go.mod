module github.com/refalloc/refalloc/arrow

go 1.26.8

require (
	github.com/apache/arrow-go/v18 v18.8.0
	github.com/refalloc/refalloc v0.0.0
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/refalloc/refalloc => ../
