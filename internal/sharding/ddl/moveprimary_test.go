package ddl

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// movePrimary's arguments: MongoDB 7.0's codes and messages for each bad input.
func TestParseMovePrimary(t *testing.T) {
	doc := func(d bson.D) bsoncore.Document {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	db, to, err := ParseMovePrimary(doc(bson.D{{Key: "movePrimary", Value: "app"}, {Key: "to", Value: "shard1"}}), "movePrimary")
	if err != nil || db != "app" || to != "shard1" {
		t.Fatalf("%s %s %v", db, to, err)
	}
	for _, c := range []struct {
		cmd  bson.D
		code mongoerr.Code
		msg  string
	}{
		{bson.D{{Key: "movePrimary", Value: 1}, {Key: "to", Value: "s"}}, mongoerr.InvalidNamespace, "'movePrimary' must be of type String"},
		{bson.D{{Key: "movePrimary", Value: "app"}}, mongoerr.Location40414, "BSON field 'movePrimary.to' is missing but a required field"},
		{bson.D{{Key: "movePrimary", Value: "app"}, {Key: "to", Value: 3}}, mongoerr.TypeMismatch, "BSON field 'movePrimary.to' is the wrong type 'int', expected type 'string'"},
		{bson.D{{Key: "movePrimary", Value: "a.b"}, {Key: "to", Value: "s"}}, mongoerr.InvalidNamespace, "invalid db name specified: a.b"},
		{bson.D{{Key: "movePrimary", Value: ""}, {Key: "to", Value: "s"}}, mongoerr.InvalidNamespace, "invalid db name specified: "},
		{bson.D{{Key: "movePrimary", Value: "admin"}, {Key: "to", Value: "s"}}, mongoerr.InvalidOptions, "Can't move primary for admin database"},
		{bson.D{{Key: "movePrimary", Value: "config"}, {Key: "to", Value: "s"}}, mongoerr.InvalidOptions, "Can't move primary for config database"},
		{bson.D{{Key: "movePrimary", Value: "local"}, {Key: "to", Value: "s"}}, mongoerr.InvalidOptions, "Can't move primary for local database"},
		{bson.D{{Key: "movePrimary", Value: "app"}, {Key: "to", Value: ""}}, mongoerr.InvalidOptions, "you have to specify where you want to move it"},
	} {
		_, _, err := ParseMovePrimary(doc(c.cmd), "movePrimary")
		me, ok := mongoerr.As(err)
		if !ok || me.Code != c.code || !strings.HasPrefix(me.Msg, c.msg) {
			t.Errorf("%v: %v, want %s %q", c.cmd, err, c.code, c.msg)
		}
	}
}

func TestClonable(t *testing.T) {
	for name, want := range map[string]bool{"c": true, "system.js": true, "system.views": false, "system.profile": false,
		"system.buckets.x": false} {
		if clonable(name) != want {
			t.Errorf("clonable(%q) = %v", name, !want)
		}
	}
}
