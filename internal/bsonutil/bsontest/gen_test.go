package bsontest

import (
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The generator must cover every type and produce valid values; the property tests built on
// it are only as good as this.
func TestRandomValueCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	seen := map[bsoncore.Type]int{}
	for range 20_000 {
		v := RandomValue(r, 3)
		seen[v.Type]++
		if err := v.Validate(); err != nil {
			t.Fatalf("invalid value %v: %v", v, err)
		}
	}
	all := []bsoncore.Type{
		bsoncore.TypeDouble, bsoncore.TypeString, bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray,
		bsoncore.TypeBinary, bsoncore.TypeUndefined, bsoncore.TypeObjectID, bsoncore.TypeBoolean,
		bsoncore.TypeDateTime, bsoncore.TypeNull, bsoncore.TypeRegex, bsoncore.TypeDBPointer,
		bsoncore.TypeJavaScript, bsoncore.TypeSymbol, bsoncore.TypeCodeWithScope, bsoncore.TypeInt32,
		bsoncore.TypeTimestamp, bsoncore.TypeInt64, bsoncore.TypeDecimal128, bsoncore.TypeMinKey,
		bsoncore.TypeMaxKey,
	}
	for _, ty := range all {
		if seen[ty] == 0 {
			t.Errorf("type %v never generated", ty)
		}
	}
}
