package keystring

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	bt "humongo/internal/bsonutil/bsontest"
	"humongo/internal/recordid"
)

func key(ord Ordering, vs ...bsoncore.Value) []byte {
	ks, _ := Encode(vs, ord, recordid.ID{})
	return ks
}

// TestPinnedEncodings pins a few byte layouts so format changes are deliberate (stored keys
// depend on them).
func TestPinnedEncodings(t *testing.T) {
	oid := [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	for _, c := range []struct {
		name string
		v    bsoncore.Value
		ord  Ordering
		want []byte
	}{
		{"int 1", bt.Int32(1), 0, []byte{43, 0x02, kEnd}},
		{"int -1", bt.Int32(-1), 0, []byte{39, 0xFD, kEnd}},
		{"int 1 desc", bt.Int32(1), 1, []byte{255 - 43, 0xFD, kEnd}},
		{"double 1.5", bt.Double(1.5), 0, []byte{43, 0x03, 0x80, 0, 0, 0, 0, 0, 0, kEnd}},
		{"int 300", bt.Int64(300), 0, []byte{44, 0x02, 0x58, kEnd}},
		{"zero", bt.Double(0), 0, []byte{41, kEnd}},
		{"NaN", bt.Double(math.NaN()), 0, []byte{30, kEnd}},
		{"string a\\0", bt.String("a\x00"), 0, []byte{60, 'a', 0, 0xFF, 0, kEnd}},
		{"null", bt.Null(), 0, []byte{20, kEnd}},
		{"oid", bt.ObjectID(oid), 0, append(append([]byte{100}, oid[:]...), kEnd)},
		{"true", bt.Bool(true), 0, []byte{111, kEnd}},
		{"object", bt.Doc("a", bt.Int32(1)), 0, []byte{70, 30, 'a', 0, 43, 0x02, 0, kEnd}},
		{"array", bt.Arr(bt.String("x")), 0, []byte{80, 60, 'x', 0, 0, kEnd}},
		{"binData", bt.Binary(0, []byte{7}), 0, []byte{90, 1, 0, 7, kEnd}},
	} {
		if got := key(c.ord, c.v); !bytes.Equal(got, c.want) {
			t.Errorf("%s: key %x, want %x", c.name, got, c.want)
		}
	}
}

// TestNumbersEqualAcrossTypes: 42, NumberLong(42), 42.0 and NumberDecimal("42.00") share one key
// and their TypeBits bring each type back (checklist §8 "Ordering / TypeBits").
func TestNumbersEqualAcrossTypes(t *testing.T) {
	vals := []bsoncore.Value{bt.Int32(42), bt.Int64(42), bt.Double(42), bt.Decimal("42.00"), bt.Decimal("4.2E+1")}
	k0 := key(0, vals[0])
	for _, v := range vals {
		ks, tb := Encode([]bsoncore.Value{v}, 0, recordid.ID{})
		if !bytes.Equal(ks, k0) {
			t.Errorf("%s: key %x, want %x", v, ks, k0)
		}
		checkRoundTrip(t, ks, tb, 0, []bsoncore.Value{v})
	}
	// Neighbours a double cannot tell apart still order by exact value.
	order := []bsoncore.Value{
		bt.Double(0.1), bt.Decimal("0.1000000000000000055511151231257828"),
		bt.Int64(1 << 53), bt.Int64(1<<53 + 1), bt.Decimal("9007199254740993.5"), bt.Double(1<<53 + 2),
		bt.Int64(math.MaxInt64), bt.Decimal("9223372036854775807.5"), bt.Double(1 << 63),
		bt.Decimal("9223372036854775808.000000000000001"), bt.Double(math.MaxFloat64),
		bt.Decimal("1E+309"), bt.Double(math.Inf(1)),
	}
	for i := 1; i < len(order); i++ {
		a, b := key(0, order[i-1]), key(0, order[i])
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("%s !< %s: %x vs %x", order[i-1], order[i], a, b)
		}
	}
}

func TestTypeBitsEmptyForDefaultTypes(t *testing.T) {
	_, tb := Encode([]bsoncore.Value{bt.Double(1.5), bt.String("x"), bt.Null(), bt.Doc("a", bt.Double(2)), bt.Bool(true)}, 0, recordid.Long(9))
	if len(tb) != 0 {
		t.Errorf("TypeBits %x, want empty", tb)
	}
	_, tb = Encode([]bsoncore.Value{bt.Int32(1), bt.Double(2)}, 0, recordid.ID{})
	if !bytes.Equal(tb, []byte{tbInt32}) {
		t.Errorf("TypeBits %x, want trailing defaults dropped", tb)
	}
}

// TestDiscriminators builds the bounds of a scan on a prefix of a {a: 1, b: -1} index.
func TestDiscriminators(t *testing.T) {
	ord := MakeOrdering(bt.D("a", bt.Int32(1), "b", bt.Int32(-1)))
	stored := func(a, b bsoncore.Value) []byte {
		ks, _ := Encode([]bsoncore.Value{a, b}, ord, recordid.Long(1))
		return ks
	}
	bound := func(d Discriminator, a bsoncore.Value) []byte {
		var b Builder
		b.Reset(ord)
		b.AppendValue(a)
		b.AppendDiscriminator(d)
		return bytes.Clone(b.Bytes())
	}
	five := bt.Double(5)
	keys := [][]byte{
		stored(bt.Int32(4), bt.MinKey()),
		bound(ExclusiveBefore, five),
		bound(Inclusive, five),
		stored(bt.Int32(5), bt.MaxKey()), // descending b: MaxKey first
		stored(bt.Int32(5), bt.String("z")),
		stored(bt.Int32(5), bt.Int32(3)),
		stored(bt.Int32(5), bt.MinKey()),
		bound(ExclusiveAfter, five),
		stored(bt.Decimal("5.000000000000000000000000000000001"), bt.MaxKey()),
		stored(bt.Double(5.5), bt.MaxKey()),
	}
	for i := 1; i < len(keys); i++ {
		if bytes.Compare(keys[i-1], keys[i]) >= 0 {
			t.Errorf("key %d %x !< key %d %x", i-1, keys[i-1], i, keys[i])
		}
	}
}

func TestMakeOrdering(t *testing.T) {
	for _, c := range []struct {
		kp   bsoncore.Document
		want Ordering
	}{
		{bt.D("a", bt.Int32(1)), 0},
		{bt.D("a", bt.Int32(-1)), 1},
		{bt.D("a", bt.Int32(1), "b", bt.Double(-1), "c", bt.String("hashed"), "d", bt.Int64(-5)), 0b1010},
		{bt.D("a", bt.Decimal("-1"), "b", bt.Decimal("1"), "c", bt.Decimal("-0"), "d", bt.Decimal("-NaN")), 1},
		{nil, 0},
	} {
		if got := MakeOrdering(c.kp); got != c.want {
			t.Errorf("MakeOrdering(%s) = %b, want %b", c.kp, got, c.want)
		}
	}
}

func TestToBSONKey(t *testing.T) {
	got := ToBSONKey([]bsoncore.Value{bt.Int32(1), bt.String("x")})
	if want := bt.D("", bt.Int32(1), "", bt.String("x")); !bytes.Equal(got, want) {
		t.Errorf("ToBSONKey = %s, want %s", got, want)
	}
	got = ToBSONKeyNamed([]string{"a"}, []bsoncore.Value{bt.Int32(1), bt.Int32(2)})
	if want := bt.D("a", bt.Int32(1), "", bt.Int32(2)); !bytes.Equal(got, want) {
		t.Errorf("ToBSONKeyNamed = %s, want %s", got, want)
	}
}

func TestMalformedValueSetsErr(t *testing.T) {
	var b Builder
	for _, v := range []bsoncore.Value{
		{Type: bsoncore.TypeString, Data: []byte{5, 0, 0, 0, 'a'}},
		{Type: bsoncore.TypeInt64, Data: []byte{1}},
		{Type: bsoncore.TypeEmbeddedDocument, Data: []byte{5, 0, 0, 0, 1}},
		{Type: bsoncore.Type(0x42)},
	} {
		b.Reset(0)
		b.AppendValue(v)
		if b.Err() == nil {
			t.Errorf("AppendValue(%v %x) accepted a malformed value", v.Type, v.Data)
		}
	}
}

// TestDecodeCorruptInput: every truncation and many byte flips of real keys return errors or
// values, never panic.
func TestDecodeCorruptInput(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	keys, tbs, ords := seedKeys()
	for i, ks := range keys {
		for n := 0; n < len(ks); n++ {
			// A strict prefix lacks the end marker after the last complete component.
			if _, err := Decode(ks[:n], ords[i], tbs[i]); err == nil && bytes.IndexByte(ks[:n], kEnd) < 0 {
				t.Errorf("Decode(%x) of a truncated key succeeded", ks[:n])
			}
			DecodeRecordIDAtEnd(ks[:n])
		}
		for j := 0; j < 200; j++ {
			c := bytes.Clone(ks)
			c[r.IntN(len(c))] ^= byte(1 + r.IntN(255))
			tb := bytes.Clone(tbs[i])
			if len(tb) > 0 && j%2 == 0 {
				tb[r.IntN(len(tb))] ^= byte(1 + r.IntN(255))
			}
			Decode(c, ords[i], tb)
			DecodeRecordIDAtEnd(c)
		}
	}
}

func TestRecordIDSuffix(t *testing.T) {
	ids := []recordid.ID{
		recordid.Long(math.MinInt64), recordid.Long(-1 << 40), recordid.Long(-257), recordid.Long(-256),
		recordid.Long(-1), recordid.Long(0), recordid.Long(1), recordid.Long(255), recordid.Long(256),
		recordid.Long(math.MaxInt64), recordid.Binary(nil), recordid.Binary([]byte{0}),
		recordid.Binary([]byte{0, 0}), recordid.Binary(bytes.Repeat([]byte{0}, 300)),
		recordid.Binary([]byte{0, 1}), recordid.Binary([]byte{1}), recordid.Binary(bytes.Repeat([]byte{0xFF}, 20000)),
	}
	var prev []byte
	for i, id := range ids {
		var b Builder
		b.AppendValue(bt.Int32(7))
		b.AppendRecordID(id) // Encode would skip the null RecordId(0)
		ks := b.Bytes()
		if i > 0 && bytes.Compare(prev, ks) >= 0 {
			t.Errorf("%v does not sort after %v", id, ids[i-1])
		}
		prev = ks
		got, n, err := DecodeRecordIDAtEnd(ks)
		if err != nil || recordid.Compare(got, id) != 0 || got.IsLong() != id.IsLong() || n != 3 {
			t.Errorf("DecodeRecordIDAtEnd(%x) = %v, %d, %v; want %v, 3", ks, got, n, err, id)
		}
	}
}

func TestBuilderDoesNotAllocate(t *testing.T) {
	vals := []bsoncore.Value{bt.Int32(12345), bt.String("hello world"), bt.Double(3.25), bt.Doc("a", bt.Int64(1))}
	var b Builder
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset(0b101)
		for _, v := range vals {
			b.AppendValue(v)
		}
		b.AppendRecordID(recordid.Long(99))
		_ = b.Bytes()
		_ = b.TypeBits()
	})
	if allocs != 0 {
		t.Errorf("Builder allocates %v times per key after warm-up", allocs)
	}
}

var benchVals = []bsoncore.Value{bt.Int32(12345), bt.String("user@example.com"), bt.Double(1234.5)}

func BenchmarkEncode(b *testing.B) {
	var kb Builder
	b.ReportAllocs()
	for b.Loop() {
		kb.Reset(0b010)
		for _, v := range benchVals {
			kb.AppendValue(v)
		}
		kb.AppendRecordID(recordid.Long(123456))
		_ = kb.Bytes()
	}
}

func BenchmarkCompare(b *testing.B) {
	k1, _ := Encode(benchVals, 0b010, recordid.Long(1))
	k2, _ := Encode(benchVals, 0b010, recordid.Long(2))
	b.ReportAllocs()
	for b.Loop() {
		if Compare(k1, k2) >= 0 {
			b.Fatal("order")
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	ks, tb := Encode(benchVals, 0b010, recordid.Long(1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(ks, 0b010, tb); err != nil {
			b.Fatal(err)
		}
	}
}
