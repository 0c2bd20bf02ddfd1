package index

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// value returns the bsoncore value of x as the driver marshals it.
func value(t testing.TB, x any) bsoncore.Value {
	t.Helper()
	b, err := bson.Marshal(bson.D{{Key: "v", Value: x}})
	if err != nil {
		t.Fatal(err)
	}
	return bsoncore.Document(b).Lookup("v")
}

// TestHash64KnownAnswers pins MongoDB's jstests/core/hashing/hash_test values (seed 1, via
// _hashBSONElement), so hashed shard key ranges agree with MongoDB.
func TestHash64KnownAnswers(t *testing.T) {
	const (
		hashOfMax  = int64(1136124329541638701)
		hashOfLow  = int64(5744114172487291558)
		hashOfZero = int64(5574369198691456941)
	)
	cases := []struct {
		name string
		v    any
		want int64
	}{
		{"string", "hashthis", 6271151123721111923},
		{"2^63", math.Pow(2, 63), hashOfLow},
		{"2^63+2^11", math.Pow(2, 63) + math.Pow(2, 11), hashOfMax},
		{"2^500", math.Pow(2, 500), hashOfMax},
		{"+inf", math.Inf(1), hashOfMax},
		{"2^63-2^10", math.Pow(2, 63) - math.Pow(2, 10), -3954856262017896439},
		{"-2^63", -math.Pow(2, 63), hashOfLow},
		{"-(2^63-2^10)", -(math.Pow(2, 63) - math.Pow(2, 10)), -1762411739488908479},
		{"-(2^63+2^11)", -(math.Pow(2, 63) + math.Pow(2, 11)), hashOfLow},
		{"-inf", math.Inf(-1), hashOfLow},
		{"0", 0.0, hashOfZero},
		{"NumberLong(0)", int64(0), hashOfZero},
		{"int32(0)", int32(0), hashOfZero},
		{"NaN", math.NaN(), hashOfZero},
		{"max long", int64(math.MaxInt64), hashOfMax},
		{"min long", int64(math.MinInt64), hashOfLow},
		{"object", bson.D{{Key: "a", Value: 1.0}, {Key: "b", Value: 2.0}}, -7076810813311352857},
		{"object corner", bson.D{{Key: "a", Value: math.Pow(2, 63)}, {Key: "b", Value: math.NaN()}}, 1223292051903137684},
	}
	for _, c := range cases {
		got, err := Hash64(value(t, c.v), 1)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: hash %d, want %d", c.name, got, c.want)
		}
	}
}

// TestHash64Properties mirrors MongoDB's jsobjhashingtests: numbers squash to int64, types and
// seeds matter.
func TestHash64Properties(t *testing.T) {
	h := func(x any, seed int32) int64 {
		v, err := Hash64(value(t, x), seed)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if h(int32(3), 0) != h(int64(3), 0) || h(3.1, 0) != h(int64(3), 0) {
		t.Error("int, long and truncated double must hash alike")
	}
	if h(int32(3), 0) == h(int32(4), 0) || h(int32(4), 0) == h(int32(4), 1) || h("3", 0) == h(int32(3), 0) {
		t.Error("distinct values/seeds must hash differently")
	}
	if h(bson.D{{Key: "0", Value: 0}, {Key: "1", Value: 1}}, 0) == h(bson.A{0, 1}, 0) {
		t.Error("array and object must differ")
	}
	if h(bson.D{{Key: "a", Value: bson.D{}}, {Key: "b", Value: 1}}, 0) == h(bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: 1}}}}, 0) {
		t.Error("sub-document grouping must matter")
	}
	if h(bson.D{{Key: "a", Value: 3}, {Key: "b", Value: bson.A{3.1, bson.D{{Key: "c", Value: 3}}}}}, 0) !=
		h(bson.D{{Key: "a", Value: 3.1}, {Key: "b", Value: bson.A{3, bson.D{{Key: "c", Value: 3.0}}}}}, 0) {
		t.Error("recursive squashing")
	}
	if h(bson.MaxKey{}, 0) == h(bson.MinKey{}, 0) {
		t.Error("minkey/maxkey")
	}
	d, _ := bson.ParseDecimal128("2.5")
	if h(d, 0) != h(int64(2), 0) {
		t.Error("decimal 2.5 should round half-even to 2")
	}
}

// TestHash64DefaultSeed pins seed-0 values (hashed indexes, hashed shard keys) recalled from
// MongoDB's hasher unit tests and convertShardKeyToHashed.
func TestHash64DefaultSeed(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int64
	}{
		{int32(0), 4854801880128277513},
		{0.0, 4854801880128277513},
		{int32(1), 5902408780260971510},
		{int64(1), 5902408780260971510},
		{int32(42), -944302157085130861},
		{42.123, -944302157085130861},
		{nil, 2338878944348059895},
	} {
		got, err := Hash64(value(t, c.v), DefaultHashSeed)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("hash(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}
