package commands

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestTouchesAuthData: which replicated operations drop a secondary's user cache.
func TestTouchesAuthData(t *testing.T) {
	doc := func(d bson.D) []byte {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inner := func(ns string) bson.D {
		return bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: ns}, {Key: "o", Value: bson.D{{Key: "_id", Value: 1}}}}
	}
	for _, c := range []struct {
		what, ns, op string
		o            bson.D
		want         bool
	}{
		{"insert of a user", "admin.system.users", "i", bson.D{{Key: "_id", Value: "app.u"}}, true},
		{"update of a role", "admin.system.roles", "u", bson.D{{Key: "$v", Value: 2}}, true},
		{"insert elsewhere in admin", "admin.other", "i", bson.D{{Key: "_id", Value: 1}}, false},
		{"transaction writing a user", "admin.$cmd", "c", bson.D{{Key: "applyOps", Value: bson.A{inner("app.c"), inner("admin.system.users")}}}, true},
		{"transaction elsewhere", "admin.$cmd", "c", bson.D{{Key: "applyOps", Value: bson.A{inner("app.c"), inner("admin.c")}}}, false},
		{"drop of system.roles", "admin.$cmd", "c", bson.D{{Key: "drop", Value: "system.roles"}}, true},
		{"drop of another admin collection", "admin.$cmd", "c", bson.D{{Key: "drop", Value: "c"}}, false},
		{"drop of app.system.users", "app.$cmd", "c", bson.D{{Key: "drop", Value: "system.users"}}, false},
		{"rename onto system.users", "admin.$cmd", "c", bson.D{{Key: "renameCollection", Value: "admin.tmp"}, {Key: "to", Value: "admin.system.users"}}, true},
		{"dropDatabase admin", "admin.$cmd", "c", bson.D{{Key: "dropDatabase", Value: 1}}, true},
	} {
		if got := authDataOp(c.ns, c.op, doc(c.o)); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}
