package shardkey

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/keystring"
	"humongo/internal/recordid"
)

// CompareKeys orders two shard keys of the same pattern (documents as ExtractKey returns and
// chunk bounds are: hashed fields already hashed) as the shard key index orders them: by
// their values' KeyStrings, field by field ascending. -1, 0 or 1.
func CompareKeys(a, b bsoncore.Document) int {
	ka, _ := keystring.Encode(Values(a), 0, recordid.ID{})
	kb, _ := keystring.Encode(Values(b), 0, recordid.ID{})
	return bytes.Compare(ka, kb)
}

// HalfOpenOverlap reports whether the ranges [aMin, aMax) and [bMin, bMax) share a key
// (MongoDB's ChunkRange::overlapWith).
func HalfOpenOverlap(aMin, aMax, bMin, bMax bsoncore.Document) bool {
	return CompareKeys(aMin, bMax) < 0 && CompareKeys(bMin, aMax) < 0
}

// InHalfOpen reports whether key lies in [min, max).
func InHalfOpen(key, min, max bsoncore.Document) bool {
	return CompareKeys(min, key) <= 0 && CompareKeys(key, max) < 0
}
