package commands_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestSnapshotReadBeforeCatalogChange: a find or aggregate at a snapshot older than the
// collection's latest catalog change (here: dropped and created again, with other documents)
// must not read the new collection at the old time: MongoDB answers SnapshotUnavailable
// (246). A majority read after the change sees the new collection.
func TestSnapshotReadBeforeCatalogChange(t *testing.T) {
	_, cl := rsTestServer(t)
	ctx := context.Background()
	db := cl.Database("snap")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "old"}}); err != nil {
		t.Fatal(err)
	}
	var r bson.Raw
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}}).Decode(&r); err != nil {
		t.Fatal(err)
	}
	atT, atI := r.Lookup("cursor", "atClusterTime").Timestamp()
	at := bson.Timestamp{T: atT, I: atI}
	if err := db.Collection("c").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "new"}}); err != nil {
		t.Fatal(err)
	}
	rc := bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}
	msg := regexp.MustCompile(fmt.Sprintf(`^Unable to read from a snapshot due to pending collection catalog changes; please retry the operation\. Snapshot timestamp is Timestamp\(%d, %d\)\. Collection minimum is Timestamp\(\d+, \d+\)$`, atT, atI))
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "readConcern", Value: rc}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}, {Key: "readConcern", Value: rc}},
	} {
		var out bson.Raw
		err := db.RunCommand(ctx, cmd).Decode(&out)
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%s at %v, before the collection was re-created: got %v (%v), want 246", cmd[0].Key, at, err, out)
		}
		if ce.Code != 246 || ce.Name != "SnapshotUnavailable" || !msg.MatchString(ce.Message) {
			t.Fatalf("%s: got %d (%s) %q, want 246 (SnapshotUnavailable) matching %s", cmd[0].Key, ce.Code, ce.Name, ce.Message, msg)
		}
	}
	// A collection created after the snapshot, and an index dropped after it, too.
	if err := db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}}).Decode(&r); err != nil {
		t.Fatal(err)
	}
	atT, atI = r.Lookup("cursor", "atClusterTime").Timestamp()
	at2 := bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: atT, I: atI}}}
	if err := db.RunCommand(ctx, bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "x_1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "later"}}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, coll := range []string{"c", "later"} {
		err := db.RunCommand(ctx, bson.D{{Key: "find", Value: coll}, {Key: "readConcern", Value: at2}}).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 246 {
			t.Fatalf("find %s at a snapshot before its catalog change: got %v, want 246", coll, err)
		}
	}

	// A majority read sees the new collection (waiting for the commit point if it must).
	if err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}}).Decode(&r); err != nil {
		t.Fatalf("majority read after the re-creation: %v", err)
	}
	if id := r.Lookup("cursor", "firstBatch", "0", "_id").StringValue(); id != "new" {
		t.Fatalf("majority read: %v", r)
	}
}
