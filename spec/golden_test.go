package spec

import (
	"os"
	"regexp"
	"testing"
)

// The golden rows below pin the generated table and the helpers derived from it
// by literal numbers. TestNoDrift only proves sizeclasses.go is what its
// generator writes, and the other tests here judge a helper by other helpers;
// neither notices a generator or helper that is wrong in a way they share.
// These rows were generated once from the table and then checked against the
// oracle's independent statement of the rules (oracle.TestAgreesWithSpec); they
// are literals from then on. A change to the table (a new constraint in
// classgen, another superblock size) must change these rows deliberately, in the
// same commit, with the new values checked by hand.

// L is spec.Large in the rows, to keep them narrow.
const L = Large

// goldenClasses[k] is class k: size, objects per superblock, ClassDivMagic, and
// ClassAlign (ALIGN: the largest power of two dividing the size).
var goldenClasses = [NumClasses]struct {
	size, objects int
	magic         uint32
	align         int
}{
	{8, 8192, 536870912, 8},   // 0
	{16, 4096, 268435456, 16}, // 1
	{32, 2048, 134217728, 32}, // 2
	{48, 1365, 89478486, 16},  // 3
	{64, 1024, 67108864, 64},  // 4
	{80, 819, 53687092, 16},   // 5
	{96, 682, 44739243, 32},   // 6
	{112, 585, 38347923, 16},  // 7
	{128, 512, 33554432, 128}, // 8
	{144, 455, 29826162, 16},  // 9
	{160, 409, 26843546, 32},  // 10
	{176, 372, 24403224, 16},  // 11
	{192, 341, 22369622, 64},  // 12
	{208, 315, 20648882, 16},  // 13
	{224, 292, 19173962, 32},  // 14
	{256, 256, 16777216, 256}, // 15
	{288, 227, 14913081, 32},  // 16
	{320, 204, 13421773, 64},  // 17
	{352, 186, 12201612, 32},  // 18
	{400, 163, 10737419, 16},  // 19
	{448, 146, 9586981, 64},   // 20
	{512, 128, 8388608, 512},  // 21
	{576, 113, 7456541, 64},   // 22
	{656, 99, 6547207, 16},    // 23
	{736, 89, 5835554, 32},    // 24
	{832, 78, 5162221, 64},    // 25
	{944, 69, 4549754, 16},    // 26
	{1024, 64, 4194304, 1024}, // 27
	{1168, 56, 3677199, 16},   // 28
	{1328, 49, 3234163, 16},   // 29
	{1504, 43, 2855697, 32},   // 30
	{1712, 38, 2508743, 16},   // 31
	{1952, 33, 2200291, 32},   // 32
	{2048, 32, 2097152, 2048}, // 33
	{2336, 28, 1838600, 32},   // 34
	{2656, 24, 1617082, 32},   // 35
	{3024, 21, 1420294, 16},   // 36
	{3456, 18, 1242757, 128},  // 37
	{3936, 16, 1091202, 32},   // 38
	{4096, 16, 1048576, 4096}, // 39
	{4672, 14, 919300, 64},    // 40
	{5328, 12, 806113, 16},    // 41
	{6080, 10, 706410, 64},    // 42
	{6944, 9, 618515, 32},     // 43
	{7936, 8, 541201, 256},    // 44
	{8192, 8, 524288, 8192},   // 45
	{9360, 7, 458865, 16},     // 46
	{10688, 6, 401850, 64},    // 47
	{12208, 5, 351816, 16},    // 48
	{13104, 5, 327761, 16},    // 49
	{14976, 4, 286791, 128},   // 50
	{16384, 4, 262144, 16384}, // 51
	{21840, 3, 196657, 16},    // 52
	{29120, 2, 147493, 64},    // 53
	{32768, 2, 131072, 32768}, // 54
}

// goldenSizeToClass: 0, and every class size and the size one past it.
var goldenSizeToClass = []struct{ n, class int }{
	{0, 0}, {8, 0}, {9, 1}, {16, 1}, {17, 2}, {32, 2}, {33, 3}, {48, 3},
	{49, 4}, {64, 4}, {65, 5}, {80, 5}, {81, 6}, {96, 6}, {97, 7}, {112, 7},
	{113, 8}, {128, 8}, {129, 9}, {144, 9}, {145, 10}, {160, 10}, {161, 11}, {176, 11},
	{177, 12}, {192, 12}, {193, 13}, {208, 13}, {209, 14}, {224, 14}, {225, 15}, {256, 15},
	{257, 16}, {288, 16}, {289, 17}, {320, 17}, {321, 18}, {352, 18}, {353, 19}, {400, 19},
	{401, 20}, {448, 20}, {449, 21}, {512, 21}, {513, 22}, {576, 22}, {577, 23}, {656, 23},
	{657, 24}, {736, 24}, {737, 25}, {832, 25}, {833, 26}, {944, 26}, {945, 27}, {1024, 27},
	{1025, 28}, {1168, 28}, {1169, 29}, {1328, 29}, {1329, 30}, {1504, 30}, {1505, 31}, {1712, 31},
	{1713, 32}, {1952, 32}, {1953, 33}, {2048, 33}, {2049, 34}, {2336, 34}, {2337, 35}, {2656, 35},
	{2657, 36}, {3024, 36}, {3025, 37}, {3456, 37}, {3457, 38}, {3936, 38}, {3937, 39}, {4096, 39},
	{4097, 40}, {4672, 40}, {4673, 41}, {5328, 41}, {5329, 42}, {6080, 42}, {6081, 43}, {6944, 43},
	{6945, 44}, {7936, 44}, {7937, 45}, {8192, 45}, {8193, 46}, {9360, 46}, {9361, 47}, {10688, 47},
	{10689, 48}, {12208, 48}, {12209, 49}, {13104, 49}, {13105, 50}, {14976, 50}, {14977, 51}, {16384, 51},
	{16385, 52}, {21840, 52}, {21841, 53}, {29120, 53}, {29121, 54}, {32768, 54},
}

// goldenAligned: AlignedClass(n, 1<<s) is class[s].
var goldenAligned = []struct {
	n     int
	class [17]int // by alignment 1, 2, 4, ..., 64 KiB
}{
	{0, [17]int{0, 0, 0, 0, 1, 2, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{1, [17]int{0, 0, 0, 0, 1, 2, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{8, [17]int{0, 0, 0, 0, 1, 2, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{9, [17]int{1, 1, 1, 1, 1, 2, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{16, [17]int{1, 1, 1, 1, 1, 2, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{17, [17]int{2, 2, 2, 2, 2, 2, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{48, [17]int{3, 3, 3, 3, 3, 4, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{49, [17]int{4, 4, 4, 4, 4, 4, 4, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{100, [17]int{7, 7, 7, 7, 7, 8, 8, 8, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{256, [17]int{15, 15, 15, 15, 15, 15, 15, 15, 15, 21, 27, 33, 39, 45, 51, 54, L}},
	{1000, [17]int{27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 33, 39, 45, 51, 54, L}},
	{1024, [17]int{27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 33, 39, 45, 51, 54, L}},
	{1025, [17]int{28, 28, 28, 28, 28, 30, 33, 33, 33, 33, 33, 33, 39, 45, 51, 54, L}},
	{4096, [17]int{39, 39, 39, 39, 39, 39, 39, 39, 39, 39, 39, 39, 39, 45, 51, 54, L}},
	{4097, [17]int{40, 40, 40, 40, 40, 40, 40, 44, 44, 45, 45, 45, 45, 45, 51, 54, L}},
	{10000, [17]int{47, 47, 47, 47, 47, 47, 47, 50, 51, 51, 51, 51, 51, 51, 51, 54, L}},
	{16385, [17]int{52, 52, 52, 52, 52, 53, 53, 54, 54, 54, 54, 54, 54, 54, 54, 54, L}},
	{32767, [17]int{54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, L}},
	{32768, [17]int{54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, L}},
	{32769, [17]int{L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L}},
}

// goldenLarge: LargeUsable(n), and the superblocks that usable size spans.
var goldenLarge = []struct{ n, usable, superblocks int }{
	{0, 4096, 1},
	{1, 4096, 1},
	{4095, 4096, 1},
	{4096, 4096, 1},
	{4097, 8192, 1},
	{32769, 36864, 1},
	{65535, 65536, 1},
	{65536, 65536, 1},
	{65537, 69632, 2},
	{196608, 196608, 3},
	{196609, 200704, 4},
	{1048577, 1052672, 17},
	{1099511627776, 1099511627776, 16777216},
}

// TestGoldenTable: the whole table, row by row.
func TestGoldenTable(t *testing.T) {
	for k, g := range goldenClasses {
		if ClassSize(k) != g.size || ClassObjects(k) != g.objects || ClassDivMagic(k) != g.magic || ClassAlign(k) != g.align {
			t.Errorf("class %d: size %d objects %d magic %d align %d, golden %d %d %d %d", k,
				ClassSize(k), ClassObjects(k), ClassDivMagic(k), ClassAlign(k), g.size, g.objects, g.magic, g.align)
		}
	}
}

// TestGoldenSizeToClass: 0 and both sides of every class boundary.
func TestGoldenSizeToClass(t *testing.T) {
	for _, g := range goldenSizeToClass {
		if got := SizeToClass(g.n); got != g.class {
			t.Errorf("SizeToClass(%d) = %d, golden %d", g.n, got, g.class)
		}
	}
}

// TestGoldenAlignedClass (ALIGN): a grid of sizes by every valid alignment.
func TestGoldenAlignedClass(t *testing.T) {
	for _, g := range goldenAligned {
		for s, want := range g.class {
			if got := AlignedClass(g.n, 1<<s); got != want {
				t.Errorf("AlignedClass(%d, %d) = %d, golden %d", g.n, 1<<s, got, want)
			}
		}
	}
	for _, a := range []int{0, -1, -16, 3, 12, 48, MaxAlign + 1, 2 * MaxAlign} {
		if ValidAlign(a) {
			t.Errorf("ValidAlign(%d) = true, golden false", a)
		}
	}
	for s := 0; 1<<s <= MaxAlign; s++ {
		if !ValidAlign(1 << s) {
			t.Errorf("ValidAlign(%d) = false, golden true", 1<<s)
		}
	}
}

// TestGoldenLarge (ZEROED, LARGE-EXACT): a large object's usable size and the
// superblocks it spans, at page and superblock boundaries.
func TestGoldenLarge(t *testing.T) {
	for _, g := range goldenLarge {
		if got := LargeUsable(g.n); got != g.usable {
			t.Errorf("LargeUsable(%d) = %d, golden %d", g.n, got, g.usable)
		}
		if got := LargeSuperblocks(g.usable); got != g.superblocks {
			t.Errorf("LargeSuperblocks(%d) = %d, golden %d", g.usable, got, g.superblocks)
		}
		if got := LargeSuperblocks(g.n); g.n > 0 && got != g.superblocks {
			t.Errorf("LargeSuperblocks(%d) = %d, golden %d", g.n, got, g.superblocks)
		}
		if got := Usable(g.n, MaxAlign); got != g.usable { // no class is 64 KiB-aligned
			t.Errorf("Usable(%d, MaxAlign) = %d, golden %d", g.n, got, g.usable)
		}
	}
}

// TestGoldenLimits pins the limits by literal values: the allocator, the
// oracle and the checker all take them from here, so a changed constant
// changes every side at once and nothing else would notice (OOM-REAL: the
// largest request; ALIGN: the largest alignment; LIFECYCLE: the superblock).
func TestGoldenLimits(t *testing.T) {
	for _, g := range []struct {
		name      string
		got, want int
	}{
		{"SuperblockShift", SuperblockShift, 16},
		{"SuperblockSize", SuperblockSize, 65536},
		{"MaxSmall", MaxSmall, 32768},
		{"PageSize", PageSize, 4096},
		{"MaxAlloc", MaxAlloc, 1099511627776},
		{"MaxAlign", MaxAlign, 65536},
		{"Large", Large, NumClasses},
	} {
		if g.got != g.want {
			t.Errorf("%s = %d, golden %d", g.name, g.got, g.want)
		}
	}
}

// TestRuleIDsAreSpecs: every rule ID constant is a rule SPEC.md states (a
// bold "**ID** —" at the start of a line), and SPEC.md states no rule
// without one: a mistyped ID would make `grep RULE-ID` miss every place that
// names the rule through the constant.
func TestRuleIDsAreSpecs(t *testing.T) {
	text, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	stated := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\*\*([A-Z]+(?:-[A-Z]+)*)\*\* —`).FindAllSubmatch(text, -1) {
		stated[string(m[1])] = true
	}
	ids := []string{RuleStatsLead, RuleStatsLag, RuleStatsExact, RuleCacheCoherent, RuleNoOverlap,
		RuleAlign, RuleZeroed, RuleIntegrity, RuleConserve, RuleFreeDouble, RuleFreeInvalid,
		RuleEmpty, RuleRefines, RuleOOMReal, RuleLargeExact, RuleMemAccount, RuleDebugPoison,
		RuleLifecycle, RuleFrontExclusive, RuleGuardFault}
	for _, id := range ids {
		if !stated[id] {
			t.Errorf("rule ID %q is not a rule of SPEC.md", id)
		}
		delete(stated, id)
	}
	for id := range stated {
		t.Errorf("SPEC.md states rule %s, which has no constant in spec", id)
	}
}
