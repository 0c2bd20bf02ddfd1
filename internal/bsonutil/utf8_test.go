package bsonutil

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func TestValidateUTF8(t *testing.T) {
	bad := string([]byte{0xff, 0xfe})
	good := bsoncore.NewDocumentBuilder().AppendString("a", "héllo").
		AppendDocument("b", bsoncore.NewDocumentBuilder().AppendString("c", "日本").Build()).Build()
	if err := ValidateUTF8(good); err != nil {
		t.Fatalf("valid document rejected: %v", err)
	}
	for name, doc := range map[string]bsoncore.Document{
		"value":  bsoncore.NewDocumentBuilder().AppendString("a", bad).Build(),
		"nested": bsoncore.NewDocumentBuilder().AppendDocument("b", bsoncore.NewDocumentBuilder().AppendString("c", bad).Build()).Build(),
		"array":  bsoncore.NewDocumentBuilder().AppendArray("b", bsoncore.NewArrayBuilder().AppendString(bad).Build()).Build(),
		"key":    bsoncore.NewDocumentBuilder().AppendString(bad, "x").Build(),
		"regex":  bsoncore.NewDocumentBuilder().AppendRegex("r", bad, "i").Build(),
	} {
		if err := ValidateUTF8(doc); !mongoerr.Is(err, mongoerr.InvalidBSON) {
			t.Errorf("%s: got %v, want InvalidBSON", name, err)
		}
	}
}
