package bsonutil

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// foldCase is a case-insensitive StringComparer for tests (the real one is collation.Collator,
// which sits at the same layer and cannot be imported here).
type foldCase struct{}

func (foldCase) CompareStrings(a, b []byte) int {
	return bytes.Compare(bytes.ToLower(a), bytes.ToLower(b))
}

func TestCompareWithCollator(t *testing.T) {
	val := func(v any) bsoncore.Value {
		b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		return bsoncore.Document(b).Lookup("v")
	}
	cases := []struct {
		a, b any
		want int
	}{
		{"ABC", "abc", 0},
		{"abd", "ABC", 1},
		{bson.D{{Key: "x", Value: "A"}}, bson.D{{Key: "x", Value: "a"}}, 0},
		{bson.A{"Q", 1}, bson.A{"q", 1}, 0},
		{bson.Symbol("X"), "x", 0},
		{bson.JavaScript("X"), bson.JavaScript("x"), -1}, // code ignores the collation
		{int32(1), 1.0, 0},
		{"a", 1, 1},
		{bson.D{{Key: "X", Value: "a"}}, bson.D{{Key: "x", Value: "a"}}, -1}, // field names are never collated
	}
	for _, tc := range cases {
		if got := CompareWithCollator(val(tc.a), val(tc.b), foldCase{}); got != tc.want {
			t.Errorf("CompareWithCollator(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if CompareWithCollator(val("A"), val("a"), nil) != Compare(val("A"), val("a")) {
		t.Error("nil comparer differs from Compare")
	}
	a, _ := bson.Marshal(bson.D{{Key: "k", Value: "HELLO"}})
	b, _ := bson.Marshal(bson.D{{Key: "k", Value: "hello"}})
	if CompareDocumentsWithCollator(a, b, foldCase{}) != 0 || CompareDocuments(a, b) == 0 {
		t.Error("CompareDocumentsWithCollator")
	}
}
