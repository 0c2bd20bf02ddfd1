package shardkey

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func TestCompareKeysAndRanges(t *testing.T) {
	k := func(vals ...any) bsoncore.Document {
		var d bson.D
		for i, v := range vals {
			d = append(d, bson.E{Key: string(rune('a' + i)), Value: v})
		}
		b, _ := bson.Marshal(d)
		return b
	}
	ordered := []bsoncore.Document{
		k(bson.MinKey{}, bson.MinKey{}), k(bson.MinKey{}, 5), k(-3, bson.MaxKey{}), k(1, bson.MinKey{}), k(1, 2), k(1.5, 0),
		k("a", 0), k("b", 0), k(bson.MaxKey{}, bson.MinKey{}), k(bson.MaxKey{}, bson.MaxKey{}),
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := CompareKeys(ordered[i], ordered[j]); got != want {
				t.Errorf("CompareKeys(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	if !HalfOpenOverlap(k(0, 0), k(10, 0), k(9, 0), k(20, 0)) || HalfOpenOverlap(k(0, 0), k(10, 0), k(10, 0), k(20, 0)) {
		t.Error("half-open overlap")
	}
	if !InHalfOpen(k(0, 0), k(0, 0), k(1, 0)) || InHalfOpen(k(1, 0), k(0, 0), k(1, 0)) {
		t.Error("InHalfOpen bounds")
	}
}
