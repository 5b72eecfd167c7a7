package main

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	refarrow "github.com/refalloc/refalloc/arrow"
	"github.com/refalloc/refalloc/impl"
)

// Params sizes the workloads; Quick is the CI size.
type Params struct {
	Int64Values  int // values of the int64 builder (8 bytes each)
	Strings      int // values of the string builder
	Rows         int // rows of the IPC and Parquet record batches
	Rounds       int // times a measurement repeats its workload
	ParquetChunk int64
}

func defaultParams() Params {
	return Params{Int64Values: 10_000_000, Strings: 2_000_000, Rows: 1_000_000, Rounds: 5, ParquetChunk: 128 << 10}
}

func quickParams() Params {
	return Params{Int64Values: 500_000, Strings: 100_000, Rows: 50_000, Rounds: 2, ParquetChunk: 16 << 10}
}

// A workload does Rounds rounds of Arrow work with mem and checks what it
// computed, so that a wrong result cannot pass for a fast one.
type workload struct {
	name  string
	about string
	run   func(mem memory.Allocator, p Params) error
}

var workloads = []workload{
	{"int64-builder", "Int64Builder grown value by value to Int64Values (80 MB at the default), NewArray, sum, Release", int64Builder},
	{"string-builder", "StringBuilder of Strings short strings, NewArray, total length, Release", stringBuilder},
	{"ipc-roundtrip", "a Rows-row batch (int64, float64, string) through an IPC stream in memory and back", ipcRoundTrip},
	{"parquet-write", "a Rows-row batch (int64, float64, string) written as Parquet (Snappy, dictionaries) to a writer that counts bytes", parquetWrite},
}

func workloadByName(name string) (workload, error) {
	for _, w := range workloads {
		if w.name == name {
			return w, nil
		}
	}
	return workload{}, fmt.Errorf("unknown workload %q", name)
}

func int64Builder(mem memory.Allocator, p Params) error {
	for range p.Rounds {
		b := array.NewInt64Builder(mem)
		for i := range p.Int64Values {
			b.Append(int64(i))
		}
		a := b.NewInt64Array()
		b.Release()
		var sum int64
		for _, v := range a.Int64Values() {
			sum += v
		}
		a.Release()
		if n := int64(p.Int64Values); sum != n*(n-1)/2 {
			return fmt.Errorf("int64-builder: sum %d, want %d", sum, n*(n-1)/2)
		}
	}
	return nil
}

func stringBuilder(mem memory.Allocator, p Params) error {
	var want int
	for i := range p.Strings {
		want += len(label(i))
	}
	for range p.Rounds {
		b := array.NewStringBuilder(mem)
		for i := range p.Strings {
			b.Append(label(i))
		}
		a := b.NewStringArray()
		b.Release()
		got := len(a.ValueBytes())
		a.Release()
		if got != want {
			return fmt.Errorf("string-builder: %d bytes of strings, want %d", got, want)
		}
	}
	return nil
}

func label(i int) string { return "value-" + strconv.Itoa(i*7919) }

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "name", Type: arrow.BinaryTypes.String},
}, nil)

func batch(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, benchSchema)
	defer b.Release()
	id := b.Field(0).(*array.Int64Builder)
	x := b.Field(1).(*array.Float64Builder)
	name := b.Field(2).(*array.StringBuilder)
	for i := range rows {
		id.Append(int64(i))
		x.Append(float64(i) / 3)
		name.Append(label(i % 1000))
	}
	return b.NewRecordBatch()
}

func ipcRoundTrip(mem memory.Allocator, p Params) error {
	var buf bytes.Buffer
	for range p.Rounds {
		rec := batch(mem, p.Rows)
		buf.Reset()
		w := ipc.NewWriter(&buf, ipc.WithSchema(benchSchema), ipc.WithAllocator(mem))
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
		if err != nil {
			return err
		}
		rows := 0
		for r.Next() {
			rows += int(r.RecordBatch().NumRows())
		}
		err = r.Err()
		r.Release()
		if err != nil {
			return err
		}
		if rows != p.Rows {
			return fmt.Errorf("ipc-roundtrip: read %d rows, wrote %d", rows, p.Rows)
		}
	}
	return nil
}

// counter is an io.Writer that only counts.
type counter struct{ n int64 }

func (c *counter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

func parquetWrite(mem memory.Allocator, p Params) error {
	var sizes []int64
	for range p.Rounds {
		rec := batch(mem, p.Rows)
		tbl := array.NewTableFromRecords(benchSchema, []arrow.RecordBatch{rec})
		rec.Release()
		var out counter
		props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy),
			parquet.WithDictionaryDefault(true))
		err := pqarrow.WriteTable(tbl, &out, p.ParquetChunk, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem)))
		tbl.Release()
		if err != nil {
			return err
		}
		sizes = append(sizes, out.n)
	}
	for _, n := range sizes {
		if n == 0 || n != sizes[0] {
			return fmt.Errorf("parquet-write: file sizes %v, want equal and non-zero", sizes)
		}
	}
	return nil
}

// An allocator under test. live is the bytes it holds for Arrow, or nil when
// it does not know (GoAllocator).
type allocator struct {
	mem   memory.Allocator
	live  func() int64
	close func() error
}

type allocKind struct {
	name string
	new  func() (allocator, error)
}

var allocKinds = []allocKind{
	{"go", func() (allocator, error) {
		return allocator{mem: memory.NewGoAllocator(), close: func() error { return nil }}, nil
	}},
	{"refalloc", func() (allocator, error) { return newRefalloc(impl.Options{}) }},
	// Retain is what a program that keeps reusing big buffers would tune:
	// the default (32 MiB) gives freed large runs back to the OS sooner.
	{"refalloc-retain256M", func() (allocator, error) { return newRefalloc(impl.Options{Retain: 256 << 20}) }},
	// Guard mode (GUARD-FAULT): every large buffer and one small one in 1000
	// (the default rate) made inaccessible when released; then every one, as
	// in a test that catches reads after Release.
	{"refalloc-guard", func() (allocator, error) {
		return newRefalloc(impl.Options{Guard: impl.GuardOptions{Enabled: true}})
	}},
	{"refalloc-guard-all", func() (allocator, error) {
		return newRefalloc(impl.Options{Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	}},
}

func newRefalloc(opt impl.Options) (allocator, error) {
	m, err := refarrow.New(opt)
	if err != nil {
		return allocator{}, err
	}
	return allocator{mem: m, live: func() int64 { return int64(m.CurrentAlloc()) }, close: m.Close}, nil
}

func allocKindByName(name string) (allocKind, error) {
	for _, k := range allocKinds {
		if k.name == name {
			return k, nil
		}
	}
	return allocKind{}, fmt.Errorf("unknown allocator %q (this build has %s)", name, kindNames())
}

func kindNames() []string {
	var s []string
	for _, k := range allocKinds {
		s = append(s, k.name)
	}
	return s
}
