package coord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
)

// TestWaitForWriteConcernModes runs custom modes on a one-member set tagged {dc: east}: a
// mode its own tags satisfy is satisfied, one needing a second dc can never be
// (UnsatisfiableWriteConcern), an unknown one is UnknownReplWriteConcern; through the insert
// command the last two come back as writeConcernError after the write. Waiting for a mode
// satisfied by other members is covered by the process test in internal/cluster
// (TestReplicaSetTagModesAndDelay).
func TestWaitForWriteConcernModes(t *testing.T) {
	n := startNode(t, "tags")
	cfg := bson.D{{Key: "_id", Value: "tags"}, {Key: "members", Value: bson.A{
		bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: n.host}, {Key: "tags", Value: bson.D{{Key: "dc", Value: "east"}}}},
	}}, {Key: "settings", Value: bson.D{{Key: "getLastErrorModes", Value: bson.D{
		{Key: "oneDC", Value: bson.D{{Key: "dc", Value: 1}}},
		{Key: "multiDC", Value: bson.D{{Key: "dc", Value: 2}}},
	}}}}}
	if _, err := n.admin(t, bson.D{{Key: "replSetInitiate", Value: cfg}}); err != nil {
		t.Fatalf("initiate: %v", err)
	}
	waitFor(t, 10*time.Second, "single node primary", n.rc.IsWritablePrimary)

	got, err := n.admin(t, bson.D{{Key: "replSetGetConfig", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	modes := toM(toM(toM(got["config"])["settings"])["getLastErrorModes"])
	if len(modes) != 2 || toM(modes["multiDC"])["dc"] != int32(2) {
		t.Fatalf("replSetGetConfig getLastErrorModes = %v", modes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	op := n.rc.LastApplied()
	if err := n.rc.WaitForWriteConcern(ctx, op, coord.WriteConcern{Mode: "oneDC", WTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("w:oneDC: %v", err)
	}
	if err := n.rc.WaitForWriteConcern(ctx, op, coord.WriteConcern{Mode: "oneDC", J: true, WTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("w:oneDC, j:true: %v", err)
	}
	err = n.rc.WaitForWriteConcern(ctx, op, coord.WriteConcern{Mode: "multiDC", WTimeout: 5 * time.Second})
	if !mongoerr.Is(err, mongoerr.UnsatisfiableWriteConcern) {
		t.Fatalf("w:multiDC on one dc: %v, want UnsatisfiableWriteConcern", err)
	}
	err = n.rc.WaitForWriteConcern(ctx, op, coord.WriteConcern{Mode: "nope", WTimeout: 5 * time.Second})
	if !mongoerr.Is(err, mongoerr.UnknownReplWriteConcern) {
		t.Fatalf("w:nope: %v, want UnknownReplWriteConcern", err)
	}

	coll := n.client.Database("test").Collection("c")
	insert := func(w string) (bson.M, error) {
		var out bson.M
		err := n.client.Database("test").RunCommand(ctx, bson.D{{Key: "insert", Value: "c"},
			{Key: "documents", Value: bson.A{bson.D{{Key: "w", Value: w}}}},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: w}, {Key: "wtimeout", Value: 5000}}}}).Decode(&out)
		return out, err
	}
	if out, err := insert("oneDC"); err != nil || out["writeConcernError"] != nil || out["n"] != int32(1) {
		t.Fatalf("insert w:oneDC: %v %v", out, err)
	}
	for w, code := range map[string]mongoerr.Code{"multiDC": mongoerr.UnsatisfiableWriteConcern, "nope": mongoerr.UnknownReplWriteConcern} {
		out, err := insert(w)
		var wce mongo.WriteConcernError
		if err == nil {
			if d, ok := out["writeConcernError"]; ok {
				m := toM(d)
				wce = mongo.WriteConcernError{Code: int(m["code"].(int32)), Name: m["codeName"].(string)}
			}
		} else {
			var we mongo.WriteException
			if errors.As(err, &we) && we.WriteConcernError != nil {
				wce = *we.WriteConcernError
			}
		}
		if wce.Code != int(code) || wce.Name != code.Name() {
			t.Fatalf("insert w:%s: reply %v, err %v; want writeConcernError %v after the write", w, out, err, code)
		}
	}
	// Both writes happened although their write concern failed.
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want 3", n, err)
	}
}
