package applier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/repl/applier/repltest"
)

// TestSessionRecordsDerivedFromOplog: the primary logs no config.transactions updates for
// retryable writes, and a member applying its oplog ends with the same session records,
// each pointing at the session's newest entry.
func TestSessionRecordsDerivedFromOplog(t *testing.T) {
	p := repltest.StartPrimary(t)
	m := repltest.StartMember(t)
	r := startReplication(t, m, p.Host, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	coll := p.Client.Database("app").Collection("retry")
	const sessions = 4
	// The sessions stay open together: the driver hands an ended session's server session
	// (its lsid) to the next one.
	for s := range sessions {
		sess, err := p.Client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.EndSession(context.Background())
		err = mongo.WithSession(ctx, sess, func(sc context.Context) error {
			// Retryable writes (the driver's default): each carries lsid and txnNumber.
			for i := range 5 {
				if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: fmt.Sprint(s, "-", i)}}); err != nil {
					return err
				}
			}
			if _, err := coll.InsertMany(sc, []any{bson.D{{Key: "_id", Value: fmt.Sprint(s, "-m1")}}, bson.D{{Key: "_id", Value: fmt.Sprint(s, "-m2")}}}); err != nil {
				return err
			}
			_, err := coll.UpdateOne(sc, bson.D{{Key: "_id", Value: fmt.Sprint(s, "-0")}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: s}}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitCaughtUp(t, p, r)

	oplogColl := p.Client.Database("local").Collection("oplog.rs")
	if n, err := oplogColl.CountDocuments(ctx, bson.D{{Key: "ns", Value: "config.transactions"}}); err != nil || n != 0 {
		t.Fatalf("primary logged %d config.transactions entries (err %v); want none", n, err)
	}
	// Same records on both (lastWriteDate included: both take the entry's wall clock).
	repltest.Compare(t, p, m)
	cur, err := m.Client.Database("config").Collection("transactions").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var recs []bson.Raw
	if err := cur.All(ctx, &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != sessions {
		t.Fatalf("member has %d session records, want %d: %v", len(recs), sessions, recs)
	}
	for _, rec := range recs {
		var last bson.Raw
		err := oplogColl.FindOne(ctx, bson.D{{Key: "lsid", Value: rec.Lookup("_id")}},
			options.FindOne().SetSort(bson.D{{Key: "$natural", Value: -1}})).Decode(&last)
		if err != nil {
			t.Fatalf("newest entry of %v: %v", rec.Lookup("_id"), err)
		}
		if !rec.Lookup("lastWriteOpTime", "ts").Equal(last.Lookup("ts")) ||
			rec.Lookup("txnNum").Int64() != last.Lookup("txnNumber").Int64() ||
			rec.Lookup("lastWriteDate").DateTime() != last.Lookup("wall").DateTime() {
			t.Errorf("record %v does not match the session's newest entry %v", rec, last)
		}
	}
}
