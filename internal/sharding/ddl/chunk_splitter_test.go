package ddl

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/sharding/shardkey"
)

func TestStrictlyIncreasing(t *testing.T) {
	// A top-chunk key equal to or below its neighbour is dropped, as is one at the minimum.
	got := keyInts(t, strictlyIncreasing(intKeys(1, 1, 5, 3, 9), intKeys(1)[0]))
	if want := []int32{5, 9}; !equalInts(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestShardKeyOfEquality(t *testing.T) {
	doc := func(b *bsoncore.DocumentBuilder) bsoncore.Document { return b.Build() }
	ranged, err := shardkey.Parse(doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 1).AppendInt32("b.c", 1)))
	if err != nil {
		t.Fatal(err)
	}
	q := doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3).AppendInt32("b.c", 4).AppendInt32("z", 1))
	k, ok := ShardKeyOfEquality(ranged, q)
	if !ok || k.Lookup("a").Int32() != 3 || k.Lookup("b.c").Int32() != 4 {
		t.Fatalf("equality: %v %v", k, ok)
	}
	nested := doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3).
		AppendDocument("b", doc(bsoncore.NewDocumentBuilder().AppendInt32("c", 4))))
	if k, ok := ShardKeyOfEquality(ranged, nested); !ok || k.Lookup("b.c").Int32() != 4 {
		t.Fatalf("nested: %v %v", k, ok)
	}
	op := doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3).
		AppendDocument("b.c", doc(bsoncore.NewDocumentBuilder().AppendInt32("$gt", 4))))
	if _, ok := ShardKeyOfEquality(ranged, op); ok {
		t.Fatal("an operator is not an equality")
	}
	if _, ok := ShardKeyOfEquality(ranged, doc(bsoncore.NewDocumentBuilder().AppendInt32("a", 3))); ok {
		t.Fatal("a missing field is not an equality")
	}
	hashed, err := shardkey.Parse(doc(bsoncore.NewDocumentBuilder().AppendString("h", "hashed")))
	if err != nil {
		t.Fatal(err)
	}
	k, ok = ShardKeyOfEquality(hashed, doc(bsoncore.NewDocumentBuilder().AppendInt32("h", 7)))
	want, _ := shardkey.HashValue(bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 7)})
	if !ok || k.Lookup("h").Int64() != want.Int64() {
		t.Fatalf("hashed: %v %v", k, ok)
	}
}
