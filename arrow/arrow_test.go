package refarrow_test

// Real Arrow code on refalloc: every scenario runs on GoAllocator first, then
// on refalloc and on refalloc in Debug mode (freed memory poisoned, so a read
// after free changes a result); the results must be equal, and every buffer
// must be back when the results are released.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	refarrow "github.com/refalloc/refalloc/arrow"
	"github.com/refalloc/refalloc/impl"
)

// A scenario does some Arrow work with mem and returns arrays to compare; the
// caller releases them.
type scenario func(t testing.TB, mem memory.Allocator) []arrow.Array

var scenarios = []struct {
	name string
	run  scenario
}{
	{"builders", builders},
	{"slice-concat", sliceConcat},
	{"ipc-stream", ipcStream},
	{"ipc-file", ipcFile},
	{"compute", computeKernels},
	{"parquet", parquetRoundTrip},
}

func newAllocator(t testing.TB, debug bool) *refarrow.Allocator {
	t.Helper()
	return newAllocatorOpt(t, impl.Options{Debug: debug})
}

// newAllocatorOpt makes an Allocator with opt (a 512 MiB reservation unless
// opt says otherwise) that fails t on any late report and, at cleanup, on
// anything left live.
func newAllocatorOpt(t testing.TB, opt impl.Options) *refarrow.Allocator {
	t.Helper()
	if opt.Reserve == 0 {
		opt.Reserve = 512 << 20
	}
	opt.OnError = func(err error) { t.Error(err) }
	mem, err := refarrow.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mem.AssertNoLeaks(t)
		if err := mem.Close(); err != nil {
			t.Error(err)
		}
	})
	return mem
}

func TestArrow(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			want := sc.run(t, memory.NewGoAllocator())
			defer release(want)
			for _, debug := range []bool{false, true} {
				t.Run(fmt.Sprintf("debug=%v", debug), func(t *testing.T) {
					mem := newAllocator(t, debug)
					got := sc.run(t, mem)
					compare(t, want, got)
					release(got)
					if s := mem.Stats(); s.PeakBytes == 0 || s.Allocs == 0 {
						t.Errorf("Arrow did not allocate through refalloc: %+v", s)
					}
				})
			}
		})
	}
}

// guardAll is guard mode with every small allocation sampled: every buffer
// Arrow releases is inaccessible while it is in quarantine (GUARD-FAULT).
var guardAll = impl.Options{Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}}

// TestArrowGuard runs every scenario in guard mode, every buffer guarded, one
// after the other and then all at once, each goroutine catching faults: Arrow
// reads no buffer after releasing it here (a read would be reported with the
// stacks that allocated, released and read it), and the results are
// GoAllocator's.
func TestArrowGuard(t *testing.T) {
	mem := newAllocatorOpt(t, guardAll)
	report := func(e *impl.UseAfterFreeError) { t.Error(e) }
	wants := make([][]arrow.Array, len(scenarios))
	for i, sc := range scenarios {
		wants[i] = sc.run(t, memory.NewGoAllocator())
		defer release(wants[i])
	}
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			defer mem.CatchFaults(report)()
			got := sc.run(t, mem)
			compare(t, wants[i], got)
			release(got)
		})
	}
	var wg sync.WaitGroup
	var comparing sync.Mutex
	for i, sc := range scenarios {
		want := wants[i]
		wg.Go(func() {
			defer mem.CatchFaults(report)()
			got := sc.run(t, mem)
			comparing.Lock()
			compare(t, want, got)
			comparing.Unlock()
			release(got)
		})
	}
	wg.Wait()
	s := mem.Stats().Impl
	if s.Guard.Allocs == 0 || s.Guard.Released == 0 && s.Guard.Quarantined == 0 {
		t.Errorf("guard mode guarded nothing: %+v", s.Guard)
	}
	t.Logf("guard: %+v; peak %d bytes live", s.Guard, mem.Stats().PeakBytes)
}

// TestGuardReportsArrowReadAfterRelease is the bug Debug mode could only
// show as wrong values: Arrow code that keeps a slice of an array's buffer
// and reads it after releasing the array. In guard mode the read faults, and
// the report names the buffer and the stacks that allocated it (the
// builder), released it and read it.
func TestGuardReportsArrowReadAfterRelease(t *testing.T) {
	mem := newAllocatorOpt(t, guardAll)
	if !mem.Impl().GuardProtects() {
		t.Skip("the Go-heap backend (-race) cannot protect memory")
	}
	b := array.NewInt64Builder(mem)
	for i := range 1000 {
		b.Append(int64(i))
	}
	arr := b.NewInt64Array()
	b.Release()
	vals := arr.Int64Values()
	if vals[999] != 999 {
		t.Fatalf("vals[999] = %d", vals[999])
	}
	releaseArray(arr)
	var got *impl.UseAfterFreeError
	func() {
		defer mem.CatchFaults(func(e *impl.UseAfterFreeError) { got = e })()
		sum := readAfterRelease(vals)
		t.Errorf("read a released buffer without a fault (sum %d)", sum)
	}()
	if got == nil {
		t.Fatal("no report")
	}
	t.Logf("the report:\n%v", got)
	for what, want := range map[string]string{
		"allocated": "array.(*Int64Builder)", "freed": "releaseArray", "accessed": "readAfterRelease",
	} {
		site := map[string]string{"allocated": got.AllocSite, "freed": got.FreeSite, "accessed": got.AccessSite}[what]
		if !strings.Contains(site, want) || !strings.Contains(site, "TestGuardReportsArrowReadAfterRelease") {
			t.Errorf("the stack that %s the buffer does not name %s and the test:\n%s", what, want, site)
		}
	}
	if got.Object != uintptr(unsafe.Pointer(unsafe.SliceData(vals))) || got.Size < 8000 {
		t.Errorf("the report names the %d-byte object at %#x, the buffer is at %p", got.Size, got.Object, unsafe.SliceData(vals))
	}
}

//go:noinline
func releaseArray(a arrow.Array) { a.Release() }

//go:noinline
func readAfterRelease(vals []int64) (sum int64) {
	for _, v := range vals {
		sum += v
	}
	return sum
}

// TestArrowConcurrent runs every scenario twice at once on one Allocator.
func TestArrowConcurrent(t *testing.T) {
	wants := make([][]arrow.Array, len(scenarios))
	for i, sc := range scenarios {
		wants[i] = sc.run(t, memory.NewGoAllocator())
		defer release(wants[i])
	}
	mem := newAllocator(t, false)
	// array.Equal is not a pure read (a dictionary array builds its
	// dictionary on first use), so comparisons with the shared wants take turns.
	var comparing sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		for i, sc := range scenarios {
			wg.Go(func() {
				got := sc.run(t, mem)
				comparing.Lock()
				compare(t, wants[i], got)
				comparing.Unlock()
				release(got)
			})
		}
	}
	wg.Wait()
}

func compare(t testing.TB, want, got []arrow.Array) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d arrays, want %d", len(got), len(want))
	}
	for i := range want {
		if !array.Equal(want[i], got[i]) {
			t.Errorf("array %d (%s) differs from GoAllocator's:\n got %.300v\nwant %.300v", i, want[i].DataType(), got[i], want[i])
		}
	}
}

func release(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var dictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "str", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "struct", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	)},
	{Name: "dict", Type: dictType},
	{Name: "listview", Type: arrow.ListViewOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// parquetFields are the columns Parquet stores (it has no list views).
const parquetFields = 7

// record builds rows rows of every column type, the same for the same seed.
func record(mem memory.Allocator, rows int, seed uint64) arrow.RecordBatch {
	r := rand.New(rand.NewPCG(seed, 2))
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	i64 := b.Field(0).(*array.Int64Builder)
	f64 := b.Field(1).(*array.Float64Builder)
	flag := b.Field(2).(*array.BooleanBuilder)
	str := b.Field(3).(*array.StringBuilder)
	list := b.Field(4).(*array.ListBuilder)
	listv := list.ValueBuilder().(*array.Int32Builder)
	st := b.Field(5).(*array.StructBuilder)
	sa := st.FieldBuilder(0).(*array.Int32Builder)
	sb := st.FieldBuilder(1).(*array.StringBuilder)
	dict := b.Field(6).(*array.BinaryDictionaryBuilder)
	lview := b.Field(7).(*array.ListViewBuilder)
	lviewv := lview.ValueBuilder().(*array.Int32Builder)
	words := []string{"arrow", "parquet", "refalloc", "superblock", "", "size class"}
	for i := range rows {
		if r.IntN(10) == 0 {
			i64.AppendNull()
			str.AppendNull()
			list.AppendNull()
			lview.AppendNull()
		} else {
			i64.Append(r.Int64N(1 << 40))
			str.Append(fmt.Sprintf("%s-%d", words[r.IntN(len(words))], i))
			n := r.IntN(8)
			list.Append(true)
			lview.AppendWithSize(true, n)
			for j := range n {
				listv.Append(int32(i + j))
				lviewv.Append(int32(i - j))
			}
		}
		f64.Append(r.Float64() * 1000)
		flag.Append(r.IntN(2) == 0)
		st.Append(true)
		sa.Append(int32(r.IntN(1000)))
		if r.IntN(5) == 0 {
			sb.AppendNull()
		} else {
			sb.Append(words[r.IntN(len(words))])
		}
		// The first rows hold every word in order, so that every batch has the
		// same dictionary: the IPC file format allows no replacement.
		w := words[r.IntN(len(words))]
		if i < len(words) {
			w = words[i]
		}
		if err := dict.AppendString(w); err != nil {
			panic(err)
		}
	}
	return b.NewRecordBatch()
}

// columns returns rec's columns, retained, and releases rec.
func columns(rec arrow.RecordBatch) []arrow.Array {
	defer rec.Release()
	var out []arrow.Array
	for _, c := range rec.Columns() {
		c.Retain()
		out = append(out, c)
	}
	return out
}

// builders: every column type, in batches small (most buffers small objects)
// and large (buffers of hundreds of KiB, grown by Reallocate).
func builders(t testing.TB, mem memory.Allocator) []arrow.Array {
	out := columns(record(mem, 100, 1))
	return append(out, columns(record(mem, 20_000, 2))...)
}

func sliceConcat(t testing.TB, mem memory.Allocator) []arrow.Array {
	var parts [][]arrow.Array
	for i := range 3 {
		cols := columns(record(mem, 3000+i*1000, uint64(10+i)))
		defer release(cols)
		parts = append(parts, cols)
	}
	var out []arrow.Array
	for c := range schema.NumFields() {
		var slices []arrow.Array
		for i, cols := range parts {
			s := array.NewSlice(cols[c], int64(i*7), int64(cols[c].Len()-i*11))
			defer s.Release()
			slices = append(slices, s)
		}
		cat, err := array.Concatenate(slices, mem)
		check(t, err)
		out = append(out, cat)
	}
	return out
}

func records(mem memory.Allocator) []arrow.RecordBatch {
	return []arrow.RecordBatch{record(mem, 5000, 20), record(mem, 7, 21), record(mem, 12_000, 22)}
}

func ipcStream(t testing.TB, mem memory.Allocator) []arrow.Array {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem), ipc.WithZstd())
	for _, rec := range records(mem) {
		check(t, w.Write(rec))
		rec.Release()
	}
	check(t, w.Close())
	r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
	check(t, err)
	defer r.Release()
	var out []arrow.Array
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		out = append(out, columns(rec)...)
	}
	check(t, r.Err())
	return out
}

func ipcFile(t testing.TB, mem memory.Allocator) []arrow.Array {
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem), ipc.WithLZ4())
	check(t, err)
	for _, rec := range records(mem) {
		check(t, w.Write(rec))
		rec.Release()
	}
	check(t, w.Close())
	r, err := ipc.NewFileReader(bytes.NewReader(buf.Bytes()), ipc.WithAllocator(mem))
	check(t, err)
	defer r.Close()
	var out []arrow.Array
	// Backwards, so that reading does not just follow writing.
	for i := r.NumRecords() - 1; i >= 0; i-- {
		rec, err := r.RecordBatch(i)
		check(t, err)
		rec.Retain()
		out = append(out, columns(rec)...)
	}
	return out
}

// computeKernels: arithmetic, filter, take and casts. (Two kernels of v18.8.0
// leak with any allocator, memory.CheckedAllocator shows it, so they are not
// here: sort_indices, whose result and scratch buffers are never released, and
// numeric-to-string casts, whose builder's array is retained by TakeOwnership
// and never released.)
func computeKernels(t testing.TB, mem memory.Allocator) []arrow.Array {
	ctx := compute.WithAllocator(context.Background(), mem)
	cols := columns(record(mem, 30_000, 30))
	defer release(cols)
	i64, flag, str, st := cols[0], cols[2], cols[3], cols[5]

	x := compute.NewDatum(i64)
	defer x.Release()
	sum, err := compute.Add(ctx, compute.ArithmeticOptions{}, x, x)
	check(t, err)
	defer sum.Release()
	filtered, err := compute.FilterArray(ctx, str, flag, *compute.DefaultFilterOptions())
	check(t, err)
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	for i := range i64.Len() {
		ib.Append(int64(i * 7919 % i64.Len()))
	}
	indices := ib.NewArray()
	defer indices.Release()
	taken, err := compute.TakeArray(ctx, st, indices)
	check(t, err)
	toFloat, err := compute.CastToType(ctx, i64, arrow.PrimitiveTypes.Float64)
	check(t, err)
	toLarge, err := compute.CastToType(ctx, str, arrow.BinaryTypes.LargeString)
	check(t, err)
	return []arrow.Array{sum.(*compute.ArrayDatum).MakeArray(), filtered, taken, toFloat, toLarge}
}

func parquetRoundTrip(t testing.TB, mem memory.Allocator) []arrow.Array {
	pschema := arrow.NewSchema(schema.Fields()[:parquetFields], nil)
	var recs []arrow.RecordBatch
	for _, rec := range records(mem) {
		recs = append(recs, array.NewRecordBatch(pschema, rec.Columns()[:parquetFields], rec.NumRows()))
		rec.Release()
	}
	tbl := array.NewTableFromRecords(pschema, recs)
	for _, rec := range recs {
		rec.Release()
	}
	defer tbl.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(true))
	check(t, pqarrow.WriteTable(tbl, &buf, 4000, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema())))

	back, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(buf.Bytes()), parquet.NewReaderProperties(mem),
		pqarrow.ArrowReadProperties{BatchSize: 3000}, mem)
	check(t, err)
	defer back.Release()
	var out []arrow.Array
	for i := range int(back.NumCols()) {
		cat, err := array.Concatenate(back.Column(i).Data().Chunks(), mem)
		check(t, err)
		out = append(out, cat)
	}
	return out
}
