package bsonutil

import (
	"fmt"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	. "humongo/internal/bsonutil/bsontest"
)

var oid1 = [12]byte{0: 1}
var oid2 = [12]byte{0: 1, 11: 1}

// orderedGroups lists values in strictly ascending canonical order; values inside one group are
// equal to each other. Every pair across the whole table is checked, so the table pins both
// type boundaries and within-type order.
var orderedGroups = [][]bsoncore.Value{
	{MinKey()},
	{Undefined()},
	{Null(), {}},
	// Numbers.
	{Double(math.NaN()), Double(-math.NaN()), Decimal("NaN"), Decimal("-NaN"), DecimalBits(0x7e00000000000000, 0), DecimalBits(0xfe00000000000000, 5)},
	{Double(math.Inf(-1)), Decimal("-Infinity")},
	{Decimal("-9.999999999999999999999999999999999E+6144")},
	{Double(-math.MaxFloat64)},
	{Decimal("-9223372036854775809")},
	{Int64(math.MinInt64), Double(-(1 << 63)), Decimal("-9223372036854775808"), Decimal("-9.223372036854775808000E+18")},
	{Int64(math.MinInt64 + 1)},
	{Int32(math.MinInt32), Int64(math.MinInt32), Double(math.MinInt32)},
	{Int32(-1), Int64(-1), Double(-1), Decimal("-1.0")},
	{Double(-0.5), Decimal("-0.50")},
	{Double(-math.SmallestNonzeroFloat64)},
	{Decimal("-1E-6176")},
	{Int32(0), Int64(0), Double(0), Double(math.Copysign(0, -1)), Decimal("0"), Decimal("-0"), Decimal("0E-6176"), Decimal("-0E+6111"), DecimalBits(0x6c00000000000000, 12345)},
	{Decimal("1E-6176")},
	{Double(math.SmallestNonzeroFloat64)},
	{Decimal("0.1")},
	{Double(0.1)}, // 0.1000000000000000055511151231257827...
	{Decimal("0.1000000000000000055511151231257828")},
	{Int32(1), Int64(1), Double(1), Decimal("1"), Decimal("1.0"), Decimal("1.000000"), Decimal("0.01E+2")},
	{Double(1.5), Decimal("1.5")},
	{Int32(42), Int64(42), Double(42), Decimal("42.00"), Decimal("4.2E+1")},
	{Int32(math.MaxInt32), Int64(math.MaxInt32), Double(math.MaxInt32)},
	{Double(math.MaxInt32 + 0.5)},
	{Int64(math.MaxInt32 + 1)},
	{Int64(1<<53 - 1), Double(1<<53 - 1)},
	{Int64(1 << 53), Double(1 << 53), Decimal("9007199254740992")},
	{Int64(1<<53 + 1), Decimal("9007199254740993")},
	{Decimal("9007199254740993.5")},
	{Int64(1<<53 + 2), Double(1<<53 + 2)},
	{Double(9223372036854774784)},
	{Int64(math.MaxInt64 - 1)},
	{Int64(math.MaxInt64), Decimal("9223372036854775807")},
	{Double(1 << 63), Decimal("9223372036854775808")},
	{Double(math.MaxFloat64)},
	{Decimal("9.999999999999999999999999999999999E+6144")},
	{Double(math.Inf(1)), Decimal("Infinity")},
	// Strings and symbols, bytewise.
	{String(""), Symbol("")},
	{String("\x00")},
	{String("A")},
	{String("a"), Symbol("a")},
	{String("a\x00")},
	{String("a\x00b")},
	{String("ab")},
	{String("b")},
	{String("é")},
	{String("\xff")},
	// Objects: field by field; type, then name, then value.
	{Doc()},
	{Doc("b", MinKey())},
	{Doc("a", Null())},
	{Doc("b", Null())},
	{Doc("a", Int32(1)), Doc("a", Double(1))},
	{Doc("a", Int32(1), "b", MinKey())},
	{Doc("a", Int32(2))},
	{Doc("z", Int32(0))}, // the name decides before the value
	{Doc("a", String(""))},
	{Doc("a", Doc())},
	{Doc("a", Doc("a", Int32(1)))},
	{Doc("a", Arr())},
	{Doc("a", MaxKey())},
	// Arrays: element-wise, shorter first.
	{Arr()},
	{Arr(MinKey())},
	{Arr(Int32(1)), Arr(Decimal("1.0"))},
	{Arr(Int32(1), Int32(2))},
	{Arr(Int32(2))},
	{Arr(String("a"))},
	{Arr(Arr())},
	{Arr(MaxKey())},
	// binData: length, then subtype, then bytes.
	{Binary(0x80, nil)},
	{Binary(0x00, []byte{0xff})},
	{Binary(0x04, []byte{0x00})},
	{Binary(0x00, []byte{0x00, 0x00})},
	{Binary(0x00, []byte{0x00, 0x01})},
	{Binary(0x00, []byte{0x01, 0x00})},
	{ObjectID(oid1)},
	{ObjectID(oid2)},
	{Bool(false)},
	{Bool(true), {Type: bsoncore.TypeBoolean, Data: []byte{2}}},
	{Date(math.MinInt64)},
	{Date(-1)},
	{Date(0)},
	{Date(math.MaxInt64)},
	{Timestamp(0, 0)},
	{Timestamp(0, math.MaxUint32)},
	{Timestamp(1, 0)},
	{Timestamp(math.MaxUint32, 0)},
	{Regex("", "")},
	{Regex("", "i")},
	{Regex("a", "")},
	{Regex("a", "i")},
	{Regex("b", "")},
	{DBPointer("a", oid2)},
	{DBPointer("b", oid1)}, // same size: raw bytes, namespace first
	{DBPointer("aa", oid1)},
	{Code("")},
	{Code("a")},
	{CodeWithScope("", D())},
	{CodeWithScope("", D("a", Int32(1))), CodeWithScope("", D("a", Double(1)))},
	{CodeWithScope("a", D())},
	{MaxKey()},
}

func TestCompareOrderedTable(t *testing.T) {
	type item struct {
		g, i int
		v    bsoncore.Value
	}
	var items []item
	for g, group := range orderedGroups {
		for i, v := range group {
			items = append(items, item{g, i, v})
		}
	}
	for _, a := range items {
		for _, b := range items {
			want := 0
			if a.g < b.g {
				want = -1
			} else if a.g > b.g {
				want = 1
			}
			got, err := CompareErr(a.v, b.v)
			if err != nil || got != want {
				t.Errorf("Compare(%s, %s) = %d, %v; want %d (groups %d,%d)", show(a.v), show(b.v), got, err, want, a.g, b.g)
			}
			if eq := Equal(a.v, b.v); eq != (want == 0) {
				t.Errorf("Equal(%s, %s) = %v", show(a.v), show(b.v), eq)
			}
		}
	}
}

func show(v bsoncore.Value) string {
	if v.Type == 0 {
		return "EOO"
	}
	return fmt.Sprintf("%s(%s)", v.Type, v)
}

func TestCanonicalTypeOrder(t *testing.T) {
	order := []bsoncore.Type{
		bsoncore.TypeMinKey, bsoncore.TypeUndefined, bsoncore.TypeNull, bsoncore.TypeDouble, bsoncore.TypeString,
		bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray, bsoncore.TypeBinary, bsoncore.TypeObjectID,
		bsoncore.TypeBoolean, bsoncore.TypeDateTime, bsoncore.TypeTimestamp, bsoncore.TypeRegex,
		bsoncore.TypeDBPointer, bsoncore.TypeJavaScript, bsoncore.TypeCodeWithScope, bsoncore.TypeMaxKey,
	}
	for i := 1; i < len(order); i++ {
		if CanonicalTypeOrder(order[i-1]) >= CanonicalTypeOrder(order[i]) {
			t.Errorf("rank(%v) >= rank(%v)", order[i-1], order[i])
		}
	}
	same := [][]bsoncore.Type{
		{bsoncore.TypeNull, 0},
		{bsoncore.TypeDouble, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDecimal128},
		{bsoncore.TypeString, bsoncore.TypeSymbol},
	}
	for _, s := range same {
		for _, x := range s {
			if CanonicalTypeOrder(x) != CanonicalTypeOrder(s[0]) {
				t.Errorf("rank(%v) != rank(%v)", x, s[0])
			}
		}
	}
	for _, bad := range []bsoncore.Type{0x14, 0x20, 0x7e, 0x80, 0xfe} {
		if CanonicalTypeOrder(bad) != RankInvalid {
			t.Errorf("rank(%#x) = %d, want RankInvalid", byte(bad), CanonicalTypeOrder(bad))
		}
	}
	// MongoDB's published ranks for the types whose rank others may persist or log.
	if CanonicalTypeOrder(bsoncore.TypeMinKey) != -1 || CanonicalTypeOrder(bsoncore.TypeMaxKey) != 127 ||
		CanonicalTypeOrder(bsoncore.TypeInt32) != 10 || CanonicalTypeOrder(bsoncore.TypeTimestamp) != 47 {
		t.Error("ranks differ from MongoDB's canonicalizeBSONType")
	}
}

func TestCompareDocumentsConsidersNames(t *testing.T) {
	cases := []struct {
		a, b bsoncore.Document
		want int
	}{
		{D(), D(), 0},
		{D(), D("a", MinKey()), -1},
		{D("a", Int32(1)), D("a", Int64(1)), 0},
		{D("a", Int32(1)), D("b", Int32(1)), -1},
		{D("b", Int32(1)), D("a", Int32(2)), 1},
		{D("a", String("x")), D("a", Int32(9)), 1},  // type before name
		{D("z", Int32(1)), D("a", String("x")), -1}, // type before name
		{D("a", Int32(1), "b", Int32(1)), D("a", Int32(1)), 1},
		{D("a", D("x", Int32(1))), D("a", D("y", Int32(0))), -1}, // names count when nested
	}
	for _, c := range cases {
		if got := CompareDocuments(c.a, c.b); got != c.want {
			t.Errorf("CompareDocuments(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := CompareDocuments(c.b, c.a); got != -c.want {
			t.Errorf("CompareDocuments(%s, %s) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

// Arrays ignore their (positional) keys; objects do not.
func TestArrayKeysIgnored(t *testing.T) {
	odd := bsoncore.Value{Type: bsoncore.TypeArray, Data: D("5", Int32(1), "x", Int32(2))}
	if c := Compare(odd, Arr(Int32(1), Int32(2))); c != 0 {
		t.Errorf("array with odd keys compared %d", c)
	}
}

func TestMalformedNeverPanics(t *testing.T) {
	good := Doc("a", Int32(1))
	truncated := bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: good.Data[:len(good.Data)-2]}
	badLen := bsoncore.Value{Type: bsoncore.TypeString, Data: []byte{0xff, 0xff, 0xff, 0x7f, 'a', 0}}
	negLen := bsoncore.Value{Type: bsoncore.TypeBinary, Data: []byte{0xff, 0xff, 0xff, 0xff, 0}}
	shortNum := bsoncore.Value{Type: bsoncore.TypeInt64, Data: []byte{1, 2}}
	badType := bsoncore.Value{Type: 0x42, Data: nil}
	innerBad := Doc("a", bsoncore.Value{Type: bsoncore.TypeString, Data: []byte{9, 0, 0, 0, 'x', 0}})
	bad := []bsoncore.Value{truncated, badLen, negLen, shortNum, badType, innerBad,
		{Type: bsoncore.TypeDecimal128, Data: []byte{1}}, {Type: bsoncore.TypeRegex, Data: []byte{'a', 0}},
		{Type: bsoncore.TypeCodeWithScope, Data: []byte{14, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0, 0, 0}},
	}
	for _, b := range bad {
		// A malformed value sorts before a well-formed one of the same type it is compared
		// against, and CompareErr reports it.
		for _, g := range []bsoncore.Value{good, String("a"), Int64(1), Binary(0, nil), MinKey()} {
			c1, c2 := Compare(b, g), Compare(g, b)
			if c1 != -c2 {
				t.Errorf("antisymmetry broken for %v vs %v: %d %d", b, g, c1, c2)
			}
		}
		if Compare(b, b) != 0 {
			t.Errorf("Compare(bad, bad) != 0 for %x", b.Data)
		}
		if _, err := CompareErr(b, b); err == nil {
			t.Errorf("CompareErr(bad, bad) = nil for type %#x data %x", byte(b.Type), b.Data)
		}
	}
	if c, err := CompareErr(truncated, good); c != -1 || err == nil {
		t.Errorf("truncated vs good = %d, %v", c, err)
	}
	if c, err := CompareErr(Int64(1), shortNum); c != 1 || err == nil {
		t.Errorf("good vs short = %d, %v", c, err)
	}
	// Depth bomb: deeper than MaxDepth is malformed, not a stack overflow.
	deep := Arr()
	for range MaxDepth + 10 {
		deep = Arr(deep)
	}
	if _, err := CompareErr(deep, deep); err == nil {
		t.Error("no error beyond MaxDepth")
	}
}

func TestToFloat64AndInt64Exact(t *testing.T) {
	fcases := []struct {
		v    bsoncore.Value
		want float64
		ok   bool
	}{
		{Int32(-5), -5, true},
		{Int64(1<<53 + 1), 1 << 53, true},
		{Double(2.5), 2.5, true},
		{Decimal("0.1"), 0.1, true},
		{Decimal("-1E+6144"), math.Inf(-1), true},
		{Decimal("Infinity"), math.Inf(1), true},
		{Decimal("1E-6176"), 0, true},
		{String("1"), 0, false},
		{bsoncore.Value{Type: bsoncore.TypeDouble, Data: []byte{1}}, 0, false},
	}
	for _, c := range fcases {
		got, ok := ToFloat64(c.v)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ToFloat64(%v) = %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
		}
	}
	if f, ok := ToFloat64(Decimal("NaN")); !ok || !math.IsNaN(f) {
		t.Errorf("ToFloat64(NaN) = %v, %v", f, ok)
	}
	icases := []struct {
		v    bsoncore.Value
		want int64
		ok   bool
	}{
		{Int32(-7), -7, true},
		{Int64(math.MinInt64), math.MinInt64, true},
		{Double(3), 3, true},
		{Double(3.5), 0, false},
		{Double(1 << 63), 0, false},
		{Double(-(1 << 63)), math.MinInt64, true},
		{Double(math.NaN()), 0, false},
		{Double(math.Inf(1)), 0, false},
		{Decimal("42.00"), 42, true},
		{Decimal("4.2E+1"), 42, true},
		{Decimal("4.25E+1"), 0, false},
		{Decimal("9223372036854775807"), math.MaxInt64, true},
		{Decimal("9223372036854775808"), 0, false},
		{Decimal("-9223372036854775808"), math.MinInt64, true},
		{Decimal("1E+6144"), 0, false},
		{Decimal("NaN"), 0, false},
		{Decimal("-0"), 0, true},
		{String("1"), 0, false},
	}
	for _, c := range icases {
		got, ok := ToInt64Exact(c.v)
		if ok != c.ok || got != c.want {
			t.Errorf("ToInt64Exact(%v) = %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
		}
	}
	for _, ty := range []bsoncore.Type{bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128} {
		if !IsNumber(ty) {
			t.Errorf("IsNumber(%v) = false", ty)
		}
	}
	if IsNumber(bsoncore.TypeString) || IsNumber(bsoncore.TypeBoolean) {
		t.Error("IsNumber true for non-number")
	}
}

func TestTypeNames(t *testing.T) {
	for _, c := range []struct {
		t    bsoncore.Type
		name string
	}{{bsoncore.TypeInt32, "int"}, {bsoncore.TypeCodeWithScope, "javascriptWithScope"}, {0, "missing"}, {0x42, "invalid"}} {
		if got := TypeName(c.t); got != c.name {
			t.Errorf("TypeName(%d) = %q, want %q", c.t, got, c.name)
		}
		if c.t != 0 && c.name != "invalid" {
			if back, ok := TypeByName(c.name); !ok || back != c.t {
				t.Errorf("TypeByName(%q) = %v, %v", c.name, back, ok)
			}
		}
	}
	if _, ok := TypeByName("number"); ok {
		t.Error(`"number" is not a single type`)
	}
}
