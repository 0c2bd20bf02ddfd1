package resumetoken

import (
	"encoding/hex"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/bsonutil/bsontest"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

func idDoc(data string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("_data", data).Build()
}

func mustUUID(t *testing.T, s string) *catalog.UUID {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatal(err)
	}
	var u catalog.UUID
	copy(u[:], b[:])
	return &u
}

func oidValue(t *testing.T, hex string) bsoncore.Value {
	t.Helper()
	oid, err := bson.ObjectIDFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return bsoncore.Value{Type: bsoncore.TypeObjectID, Data: oid[:]}
}

func docValue(d bsoncore.Document) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
}

func dataOf(t *testing.T, id bsoncore.Document) string {
	t.Helper()
	v, err := id.LookupErr("_data")
	if err != nil {
		t.Fatal(err)
	}
	return v.StringValue()
}

// Tokens MongoDB servers produced, published with the event they came with.
func TestKnownVectors(t *testing.T) {
	v2EventID := func(opType string, id bsoncore.Value) bsoncore.Value {
		return docValue(bsoncore.NewDocumentBuilder().AppendString("operationType", opType).
			AppendDocument("documentKey", bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build()).Build())
	}
	v1EventID := func(id bsoncore.Value) bsoncore.Value {
		return docValue(bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build())
	}
	str := func(s string) bsoncore.Value {
		return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}
	}
	for _, tc := range []struct {
		name string
		hex  string
		want Data
	}{{
		// MongoDB manual, "Resume Tokens from Change Events": insert at Timestamp(1666193824, 1),
		// collectionUUID ab1154ac-acd8-49a4-8c61-756d70d3b21f.
		name: "manual v2 insert",
		hex:  "82635019A0000000012B042C0100296E5A1004AB1154ACACD849A48C61756D70D3B21F463C6F7065726174696F6E54797065003C696E736572740046646F63756D656E744B65790046645F69640064635019A078BE67426D7CF4D2000004",
		want: Data{ClusterTime: optime.MakeTimestamp(1666193824, 1), Version: 2, TokenType: Event,
			UUID:    mustUUID(t, "ab1154acacd849a48c61756d70d3b21f"),
			EventID: v2EventID("insert", oidValue(t, "635019a078be67426d7cf4d2"))},
	}, {
		name: "v2 update, string _id",
		hex:  "8265580539000000012B042C0100296E5A1004A7F55A5B35BD4C7DB2CD56C6CFEA9C49463C6F7065726174696F6E54797065003C7570646174650046646F63756D656E744B657900463C5F6964003C6265657200000004",
		want: Data{ClusterTime: optime.MakeTimestamp(1700267321, 1), Version: 2, TokenType: Event,
			UUID:    mustUUID(t, "a7f55a5b35bd4c7db2cd56c6cfea9c49"),
			EventID: v2EventID("update", str("beer"))},
	}, {
		name: "v2 in a transaction (txnOpIndex 499)",
		hex:  "8267E73748000000222B042C01002C03E66E5A1004F3ACB4AA4DE147A0B0F5F541701E4310463C6F7065726174696F6E54797065003C696E736572740046646F63756D656E744B65790046645F6964006467E7374793A5A7D34207F732000004",
		want: Data{ClusterTime: optime.MakeTimestamp(0x67E73748, 0x22), Version: 2, TokenType: Event, TxnOpIndex: 499,
			UUID:    mustUUID(t, "f3acb4aa4de147a0b0f5f541701e4310"),
			EventID: v2EventID("insert", oidValue(t, "67e7374793a5a7d34207f732"))},
	}, {
		name: "v2 high water mark",
		hex:  "826A8C8E64000000012B0429296E1404",
		want: Data{ClusterTime: optime.MakeTimestamp(0x6A8C8E64, 1), Version: 2, TokenType: HighWaterMark},
	}, {
		name: "v1 delete",
		hex:  "8264AFD9B3000000072B022C0100296E5A10046168B795C70D4DCAB37BA5BADF3B7C4346645F6964006464AFCAC2582316AE841840330004",
		want: Data{ClusterTime: optime.MakeTimestamp(1689246131, 7), Version: 1, TokenType: Event,
			UUID:    mustUUID(t, "6168b795c70d4dcab37ba5badf3b7c43"),
			EventID: v1EventID(oidValue(t, "64afcac2582316ae84184033"))},
	}, {
		name: "v1 update, string _id",
		hex:  "82628E0A040000008D2B022C0100296E5A10043EA07DF5DB3F4ADA80195CC1112253FA463C5F6964003C363238643130313363376431363561396238303639653334000004",
		want: Data{ClusterTime: optime.MakeTimestamp(1653475844, 141), Version: 1, TokenType: Event,
			UUID:    mustUUID(t, "3ea07df5db3f4ada80195cc1112253fa"),
			EventID: v1EventID(str("628d1013c7d165a9b8069e34"))},
	}, {
		name: "v1 high water mark",
		hex:  "8263A36285000000112B0229296E04",
		want: Data{ClusterTime: optime.MakeTimestamp(0x63A36285, 0x11), Version: 1, TokenType: HighWaterMark},
	}, {
		name: "v0 insert",
		hex:  "825C5D51F70000000129295A1004E83608EE8F1B4FBABDCEE73D5BF31FC946645F696400645C5D51F73ACA83479B48DE6E0004",
		want: Data{ClusterTime: optime.MakeTimestamp(0x5C5D51F7, 1), Version: 0, TokenType: Event,
			UUID:    mustUUID(t, "e83608ee8f1b4fbabdcee73d5bf31fc9"),
			EventID: v1EventID(oidValue(t, "5c5d51f73aca83479b48de6e"))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(idDoc(tc.hex))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if Compare(got, tc.want) != 0 {
				t.Fatalf("decode:\n got %+v\nwant %+v", got, tc.want)
			}
			if got.IsHighWaterMark() != (tc.want.TokenType == HighWaterMark) {
				t.Errorf("IsHighWaterMark = %v", got.IsHighWaterMark())
			}
			id := Encode(tc.want)
			if h := dataOf(t, id); h != tc.hex {
				t.Errorf("encode:\n got %s\nwant %s", h, tc.hex)
			}
			if _, err := id.LookupErr("_typeBits"); err == nil {
				t.Errorf("unexpected _typeBits in %v", id)
			}
		})
	}
}

func ev2(opType string, key bsoncore.Value) bsoncore.Value {
	return docValue(bsoncore.NewDocumentBuilder().AppendString("operationType", opType).
		AppendDocument("documentKey", bsoncore.NewDocumentBuilder().AppendValue("_id", key).Build()).Build())
}

func num(t bsoncore.Type, data []byte) bsoncore.Value { return bsoncore.Value{Type: t, Data: data} }

func decimal(t *testing.T, s string) bsoncore.Value {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	h, l := d.GetBytes()
	return num(bsoncore.TypeDecimal128, bsoncore.AppendDecimal128(nil, h, l))
}

// sameValue is identity of type and bytes, stricter than BSON equality: 1 and 1.0 differ,
// as do -0.0 and 0.0 and decimals with different exponents.
func sameValue(a, b bsoncore.Value) bool {
	return a.Type == b.Type && string(a.Data) == string(b.Data)
}

func roundTrip(t *testing.T, key bsoncore.Value) {
	t.Helper()
	u := catalog.UUID{1, 2, 3}
	in := Data{ClusterTime: optime.MakeTimestamp(100, 2), Version: DefaultVersion, TokenType: Event, UUID: &u, EventID: ev2("insert", key)}
	id, err := Make(in)
	if err != nil {
		t.Fatalf("make %s: %v", key, err)
	}
	out, err := Decode(id)
	if err != nil {
		t.Fatalf("decode %s (%s): %v", key, dataOf(t, id), err)
	}
	got, _ := bsoncore.Document(out.EventID.Data).LookupErr("documentKey", "_id")
	if !sameValue(got, key) && !(hasNonCanonicalDecimal(key) && bsonutil.Equal(got, key)) {
		t.Fatalf("round trip of %s (%x) gave %s (%x); token %s", key, key.Data, got, got.Data, id)
	}
	if Compare(in, out) != 0 {
		t.Fatalf("round trip changed the data: %+v vs %+v", in, out)
	}
}

func TestRoundTripEveryType(t *testing.T) {
	dbl := func(f float64) bsoncore.Value { return num(bsoncore.TypeDouble, bsoncore.AppendDouble(nil, f)) }
	i32 := func(i int32) bsoncore.Value { return num(bsoncore.TypeInt32, bsoncore.AppendInt32(nil, i)) }
	i64 := func(i int64) bsoncore.Value { return num(bsoncore.TypeInt64, bsoncore.AppendInt64(nil, i)) }
	vals := []bsoncore.Value{
		bsontest.MinKey(), bsontest.MaxKey(), bsontest.Null(), bsontest.Undefined(),
		bsontest.String(""), bsontest.String("abc"), bsontest.String("a\x00b\x00"), bsontest.Symbol("sym"),
		bsontest.Doc("a", i32(1), "b", bsontest.Arr(dbl(1.5), bsontest.String("x"))), bsontest.Doc(), bsontest.Arr(),
		bsontest.Binary(0, []byte("hello")), bsontest.Binary(4, make([]byte, 16)), bsontest.Binary(0x80, make([]byte, 300)),
		bsontest.Binary(2, []byte{3, 0, 0, 0, 'a', 'b', 'c'}),
		bsontest.ObjectID([12]byte{1, 2, 3}), bsontest.Bool(true), bsontest.Bool(false),
		bsontest.Date(0), bsontest.Date(-1), bsontest.Date(1700000000000), bsontest.Timestamp(5, 6),
		bsontest.Regex("a.*b", "i"), bsontest.DBPointer("db.c", [12]byte{9}), bsontest.Code("function(){}"),
		bsontest.CodeWithScope("x", bsontest.D("x", i32(1))),
		i32(0), i32(1), i32(-1), i32(127), i32(-300), i32(math.MaxInt32), i32(math.MinInt32),
		i64(0), i64(1), i64(-1), i64(1 << 40), i64(math.MaxInt64), i64(math.MinInt64), i64(-(1 << 53) - 1),
		dbl(0), dbl(math.Copysign(0, -1)), dbl(1), dbl(-1), dbl(1.5), dbl(-1.5), dbl(0.1), dbl(-0.1), dbl(1e-300),
		dbl(5e-324), dbl(-5e-324), dbl(1e300), dbl(-1e300), dbl(math.Inf(1)), dbl(math.Inf(-1)), dbl(math.NaN()),
		dbl(1 << 63), dbl(-(1 << 63)), dbl(12345.678), dbl(1 << 53), dbl(math.MaxFloat64), dbl(0x1p-256), dbl(0x1p-1022),
	}
	for _, s := range []string{
		"0", "-0", "0E+10", "-0E-20", "1", "1.0", "1.00", "-1", "1.5", "0.1", "-0.1", "0.10", "123456789012345",
		"1234567890123456", "1234567890123456789012345678901234", "-1234567890123456789012345678901234",
		"9.999999999999999999999999999999999E+6144", "1E+6144", "1E-6176", "-1E-6176", "1E-400", "1.234E-320",
		"3.14159265358979323846264338327950", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
		"9007199254740993", "9007199254740995.5", "36028797018963969.5", "12345678901234567.89", "1E+308", "2E+308", "1E-308", "1E-310",
		"NaN", "Infinity", "-Infinity", "0.000001", "1E-100", "7E-260", "123.456E-300",
	} {
		vals = append(vals, decimal(t, s))
	}
	for _, v := range vals {
		roundTrip(t, v)
	}
}

func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		roundTrip(t, bsontest.RandomValue(r, 3))
	}
}

// Type bits: a double _id needs them; an int or a string does not.
func TestTypeBitsOnlyWhenNeeded(t *testing.T) {
	u := catalog.UUID{}
	for _, tc := range []struct {
		key  bsoncore.Value
		want bool
	}{
		{num(bsoncore.TypeInt32, bsoncore.AppendInt32(nil, 7)), false},
		{bsontest.String("x"), false},
		{num(bsoncore.TypeDouble, bsoncore.AppendDouble(nil, 7)), true},
		{num(bsoncore.TypeInt64, bsoncore.AppendInt64(nil, 7)), true},
		{bsontest.Symbol("x"), true},
	} {
		id := Encode(Data{Version: 2, TokenType: Event, UUID: &u, EventID: ev2("insert", tc.key)})
		if _, err := id.LookupErr("_typeBits"); (err == nil) != tc.want {
			t.Errorf("%s: _typeBits present = %v, want %v", tc.key, err == nil, tc.want)
		}
	}
}

// Tokens order by cluster time both as data and as _data strings.
func TestOrderingFollowsClusterTime(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	u := catalog.UUID{7}
	var prev Data
	var prevHex string
	ts := optime.MakeTimestamp(1, 0)
	for i := range 2000 {
		ts += optime.Timestamp(1 + r.Uint64N(1<<40))
		var d Data
		switch i % 3 {
		case 0:
			d = HighWaterMarkAt(ts)
		case 1:
			d = Data{ClusterTime: ts, Version: 2, TokenType: Event, UUID: &u, EventID: ev2("insert", bsontest.RandomValue(r, 2))}
		default:
			d = Data{ClusterTime: ts, Version: 2, TokenType: Event, TxnOpIndex: r.IntN(1000), EventID: ev2("delete", bsontest.RandomValue(r, 2))}
		}
		h := dataOf(t, Encode(d))
		if i > 0 {
			if Compare(prev, d) >= 0 {
				t.Fatalf("Compare not increasing at %d", i)
			}
			if prevHex >= h {
				t.Fatalf("_data not increasing at %d: %s >= %s", i, prevHex, h)
			}
		}
		prev, prevHex = d, h
	}
}

// Within a cluster time, the _data order is Compare's order too for these fields.
func TestOrderingWithinClusterTime(t *testing.T) {
	ts := optime.MakeTimestamp(50, 1)
	u := catalog.UUID{7}
	key := func(i int32) bsoncore.Value {
		return ev2("insert", num(bsoncore.TypeInt32, bsoncore.AppendInt32(nil, i)))
	}
	ordered := []Data{
		HighWaterMarkAt(ts),
		{ClusterTime: ts, Version: 2, TokenType: Event, UUID: &u, EventID: key(-5)},
		{ClusterTime: ts, Version: 2, TokenType: Event, UUID: &u, EventID: key(3)},
		{ClusterTime: ts, Version: 2, TokenType: Event, TxnOpIndex: 1, UUID: &u, EventID: key(1)},
		{ClusterTime: ts, Version: 2, TokenType: Event, TxnOpIndex: 2, UUID: &u, EventID: key(1)},
		{ClusterTime: ts, Version: 2, TokenType: Event, TxnOpIndex: 2, FromInvalidate: true, UUID: &u, EventID: key(1)},
	}
	for i := 1; i < len(ordered); i++ {
		a, b := ordered[i-1], ordered[i]
		if Compare(a, b) >= 0 || dataOf(t, Encode(a)) >= dataOf(t, Encode(b)) {
			t.Errorf("%d: not ordered: %+v vs %+v", i, a, b)
		}
	}
}

func TestHighWaterMark(t *testing.T) {
	d := HighWaterMarkAt(optime.MakeTimestamp(9, 9))
	if !d.IsHighWaterMark() || d.Version != DefaultVersion {
		t.Fatalf("%+v", d)
	}
	got, err := Decode(Encode(d))
	if err != nil || !got.IsHighWaterMark() {
		t.Fatalf("%+v %v", got, err)
	}
	u := catalog.UUID{}
	if (Data{ClusterTime: 9, Version: 2, TokenType: Event, UUID: &u, EventID: ev2("insert", bsontest.Null())}).IsHighWaterMark() {
		t.Fatal("an event is not a high water mark")
	}
}

func TestFragmentNum(t *testing.T) {
	n := 3
	u := catalog.UUID{}
	d := Data{ClusterTime: 9, Version: 2, TokenType: Event, UUID: &u, EventID: ev2("insert", bsontest.Null()), FragmentNum: &n}
	got, err := Decode(Encode(d))
	if err != nil || got.FragmentNum == nil || *got.FragmentNum != 3 {
		t.Fatalf("%+v %v", got, err)
	}
	d.Version = 1
	if _, err := Make(d); !mongoerr.Is(err, mongoerr.Location7182504) {
		t.Fatalf("v1 fragmentNum: %v", err)
	}
}

func TestMakeErrors(t *testing.T) {
	u := catalog.UUID{}
	for _, tc := range []struct {
		d    Data
		code mongoerr.Code
	}{
		{Data{Version: 2, TokenType: HighWaterMark, UUID: &u}, mongoerr.Location6189505},
		{Data{Version: 1, TokenType: Event, EventID: ev2("insert", bsontest.Null())}, mongoerr.Location50788},
		{Data{Version: 2, TokenType: Event, UUID: &u}, mongoerr.Location6189502},
	} {
		if _, err := Make(tc.d); !mongoerr.Is(err, tc.code) {
			t.Errorf("%+v: %v, want %v", tc.d, err, tc.code)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Encode did not panic on invalid data")
		}
	}()
	Encode(Data{Version: 2, TokenType: HighWaterMark, UUID: &u})
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   bsoncore.Document
		code mongoerr.Code
	}{
		{"no _data", bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build(), mongoerr.Location40647},
		{"_data not a string", bsoncore.NewDocumentBuilder().AppendInt32("_data", 1).Build(), mongoerr.Location40647},
		{"bad _typeBits", bsoncore.NewDocumentBuilder().AppendString("_data", "8204").AppendInt32("_typeBits", 1).Build(), mongoerr.Location40648},
		{"odd hex", idDoc("820"), mongoerr.FailedToParse},
		{"not hex", idDoc("ZZ"), mongoerr.FailedToParse},
		{"empty", idDoc(""), mongoerr.Location40649},
		{"only end", idDoc("04"), mongoerr.Location40649},
		{"no version", idDoc("82000000010000000104"), mongoerr.Location50796},
		{"version not int", idDoc("8200000001000000013C780004"), mongoerr.Location50854},
		{"version 3", idDoc("8200000001000000012B0604"), mongoerr.Location50795},
		{"unknown ctype", idDoc("FF"), mongoerr.Location50811},
		{"no tokenType", idDoc("8200000001000000012B0404"), mongoerr.Location51055},
		{"bad tokenType", idDoc("8200000001000000012B042B0204"), mongoerr.Location51057},
		{"no txnOpIndex", idDoc("8200000001000000012B042C010004"), mongoerr.Location50793},
		{"negative txnOpIndex", idDoc("8200000001000000012B042C010027FD04"), mongoerr.Location50794},
		{"no fromInvalidate", idDoc("8200000001000000012B042C01002904"), mongoerr.Location50872},
		{"v2 no uuid", idDoc("8200000001000000012B042C0100296E04"), mongoerr.Location6189500},
		{"v2 event no eventIdentifier", idDoc("8200000001000000012B042C0100296E1404"), mongoerr.Location6189501},
		{"hwm with eventIdentifier", idDoc("8200000001000000012B0429296E14460004"), mongoerr.Location6189504},
		{"eventIdentifier not object", idDoc("8200000001000000012B042C0100296E142904"), mongoerr.Location6189503},
		{"oversized", idDoc("8200000001000000012B042C0100296E144600292904"), mongoerr.Location40646},
		{"unterminated string", idDoc("3C41"), mongoerr.Location50816},
		{"truncated", idDoc("82000000"), mongoerr.Overflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.id)
			if !mongoerr.Is(err, tc.code) {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}

func TestDecodeOption(t *testing.T) {
	_, err := DecodeOption("resumeAfter", num(bsoncore.TypeInt32, bsoncore.AppendInt32(nil, 1)))
	if !mongoerr.Is(err, mongoerr.TypeMismatch) ||
		!strings.Contains(err.Error(), "BSON field '$changeStream.resumeAfter' is the wrong type 'int', expected type 'object'") {
		t.Fatalf("%v", err)
	}
	d, err := DecodeOption("startAfter", docValue(idDoc("826A8C8E64000000012B0429296E1404")))
	if err != nil || !d.IsHighWaterMark() {
		t.Fatalf("%+v %v", d, err)
	}
}

// Compare agrees with BSON equality for the eventIdentifier: 1 and 1.0 are the same event.
func TestCompareEventIDNumericEquality(t *testing.T) {
	a := Data{Version: 2, TokenType: Event, EventID: ev2("insert", num(bsoncore.TypeInt32, bsoncore.AppendInt32(nil, 1)))}
	b := Data{Version: 2, TokenType: Event, EventID: ev2("insert", num(bsoncore.TypeDouble, bsoncore.AppendDouble(nil, 1)))}
	if Compare(a, b) != 0 || !bsonutil.Equal(a.EventID, b.EventID) {
		t.Fatal("1 and 1.0 differ")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("82635019A0000000012B042C0100296E5A1004AB1154ACACD849A48C61756D70D3B21F463C6F7065726174696F6E54797065003C696E736572740046646F63756D656E744B65790046645F69640064635019A078BE67426D7CF4D2000004", []byte(nil))
	f.Add("826A8C8E64000000012B0429296E1404", []byte{0x81, 0x03})
	f.Add("2A01", []byte{0x80, 0xff, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data string, typeBits []byte) {
		b := bsoncore.NewDocumentBuilder().AppendString("_data", data)
		if typeBits != nil {
			b.AppendBinary("_typeBits", 0, typeBits)
		}
		d, err := Decode(b.Build())
		if err != nil {
			if _, ok := mongoerr.As(err); !ok {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		// What decodes re-encodes, unless it is data MongoDB would not make either.
		if _, err := Make(d); err != nil {
			if _, ok := mongoerr.As(err); !ok {
				t.Fatalf("uncoded error %v", err)
			}
		}
	})
}

// hasNonCanonicalDecimal reports whether v holds a double NaN other than the quiet one or a decimal whose coefficient is not canonical
// (decoded as zero) a NaN other than the positive quiet one, or an infinity with payload bits; such a decimal comes back
// as its canonical equal.
func hasNonCanonicalDecimal(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeDouble:
		f := v.Double()
		return f != f && math.Float64bits(f) != math.Float64bits(math.NaN()) // NaNs decode as the quiet NaN
	case bsoncore.TypeDecimal128:
		d := decimalFromBSON(v.Data)
		hi, lo := d.coefficient()
		if d.isNaN() {
			return d != decimalPositiveNaN // every NaN decodes as the positive quiet NaN
		}
		if d.isInf() {
			return d.lo != 0 || d.hi&^decimalSignBit != 0x7800000000000000
		}
		return d.isFinite() && hi == 0 && lo == 0 && (d.hi&(1<<49-1) != 0 || d.lo != 0 || (d.hi>>61)&3 == 3)
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		vals, _ := bsoncore.Document(v.Data).Values()
		for _, e := range vals {
			if hasNonCanonicalDecimal(e) {
				return true
			}
		}
	case bsoncore.TypeCodeWithScope:
		_, scope, _ := v.CodeWithScopeOK()
		return hasNonCanonicalDecimal(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: scope})
	}
	return false
}

// MongoDB's decoder compares the integer part of a decimal between 2^53 and 2^55 with 2^53
// as a double, so 2^53+1 with a fraction decodes one lower (key_string.cpp, toBsonValue's
// "integerPart > kMaxIntForDouble"). Humongo reproduces it so that tokens decode alike.
func TestDecimalQuirkAt2Pow53Plus1(t *testing.T) {
	u := catalog.UUID{}
	d := Data{Version: 2, TokenType: Event, UUID: &u, EventID: ev2("insert", decimal(t, "9007199254740993.5"))}
	out, err := Decode(Encode(d))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := bsoncore.Document(out.EventID.Data).LookupErr("documentKey", "_id")
	if want := decimal(t, "9007199254740992.5"); !sameValue(got, want) {
		t.Fatalf("got %s, want MongoDB's %s", got, want)
	}
}
