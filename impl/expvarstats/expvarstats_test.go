package expvarstats_test

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/impl/expvarstats"
)

func TestPublish(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := a.Alloc(100)
	big, _ := a.Alloc(100_000)
	a.Free(b)
	a.Flush()
	expvarstats.Publish("refalloc_test", a)
	var v expvarstats.Vars
	if err := json.Unmarshal([]byte(expvar.Get("refalloc_test").String()), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Classes) != 1 || v.Classes[0].Size != 112 || v.Classes[0].Allocs != 1 || v.Classes[0].Frees != 1 ||
		v.LargeLiveObjects != 1 || v.LargeLiveBytes != 102400 || v.ReservedBytes != 1<<20 || v.InUseBytes == 0 {
		t.Fatalf("published %+v", v)
	}
	a.Free(big)
}
