package update

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil/bsontest"
)

// benchDoc is a ~1 KB document shaped like an application record.
func benchDoc() bsoncore.Document {
	return bsontest.D(
		"_id", bsontest.Int32(42),
		"name", bsontest.String(strings.Repeat("n", 40)),
		"email", bsontest.String("someone@example.com"),
		"count", bsontest.Int32(7),
		"profile", bsontest.Doc("bio", bsontest.String(strings.Repeat("b", 400)), "age", bsontest.Int32(30)),
		"tags", bsontest.Arr(bsontest.String("x"), bsontest.String("y"), bsontest.String("z")),
		"notes", bsontest.String(strings.Repeat("t", 400)),
		"status", bsontest.String("new"),
	)
}

func BenchmarkApplySetInc(b *testing.B) {
	doc := benchDoc()
	u, err := Parse(bsontest.D(
		"$set", bsontest.D("status", bsontest.String("old")),
		"$inc", bsontest.D("count", bsontest.Int32(1)),
	), ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		_, changed, err := u.Apply(doc, ApplyContext{})
		if err != nil || !changed {
			b.Fatal(err, changed)
		}
	}
}

func BenchmarkApplyNestedPush(b *testing.B) {
	doc := benchDoc()
	u, err := Parse(bsontest.D(
		"$set", bsontest.D("profile.age", bsontest.Int32(31)),
		"$push", bsontest.D("tags", bsontest.String("w")),
	), ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := u.Apply(doc, ApplyContext{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSetInc(b *testing.B) {
	upd := bsontest.D(
		"$set", bsontest.D("status", bsontest.String("old")),
		"$inc", bsontest.D("count", bsontest.Int32(1)),
	)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(upd, ParseOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
