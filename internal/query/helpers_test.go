package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// ej parses relaxed Extended JSON ("1" is int32, "1.0" a double, big integers int64) into a
// raw document.
func ej(t testing.TB, s string) bsoncore.Document {
	t.Helper()
	var r bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &r); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return bsoncore.Document(r)
}

// re is a regex literal in Extended JSON.
func re(pattern, opts string) string {
	return `{"$regularExpression": {"pattern": "` + pattern + `", "options": "` + opts + `"}}`
}
