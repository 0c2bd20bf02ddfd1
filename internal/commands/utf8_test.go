package commands_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// A command carrying a string that is not UTF-8 is refused at the boundary and changes nothing.
func TestInvalidUTF8Rejected(t *testing.T) {
	e := findStart(t)
	bad := bson.Raw(bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).
		AppendString("s", string([]byte{'o', 'k', 0xff})).Build())
	_, err := e.run(bson.D{{Key: "insert", Value: "u"}, {Key: "documents", Value: bson.A{bad}}})
	findCode(t, err, int32(mongoerr.InvalidBSON))
	if got := e.findIDs(bson.D{{Key: "find", Value: "u"}}); len(got) != 0 {
		t.Fatalf("rejected insert stored documents: %v", got)
	}
	_, err = e.run(bson.D{{Key: "find", Value: "u"}, {Key: "filter", Value: bson.Raw(bsoncore.NewDocumentBuilder().
		AppendString("s", string([]byte{0xc3})).Build())}})
	findCode(t, err, int32(mongoerr.InvalidBSON))
}
