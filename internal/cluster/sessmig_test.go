package cluster

// Session migration across chunk moves (spec: checklist-sharding.md section 7 "Across
// migrations", "findAndModify images"; MongoDB's SessionCatalogMigrationSource/Destination):
// retryable writes sent by hand through the router (lsid and txnNumber), their chunk moved,
// the very same commands sent again: each answers its first reply and nothing runs twice,
// after one move and after the move back (which migrates the migrated history again).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestShardedMigrationRetryableWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	run(bson.D{{Key: "enableSharding", Value: "sm"}, {Key: "primaryShard", Value: s0}})
	run(bson.D{{Key: "shardCollection", Value: "sm.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	run(bson.D{{Key: "split", Value: "sm.c"}, {Key: "middle", Value: bson.D{{Key: "k", Value: 100}}}})
	coll := d.Client.Database("sm").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}, {Key: "v", Value: 0}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 2}, {Key: "v", Value: 0}},
		bson.D{{Key: "_id", Value: 200}, {Key: "k", Value: 200}, {Key: "v", Value: 0}},
	}); err != nil {
		t.Fatal(err)
	}

	// One session per command: only a session's newest txnNumber can be retried.
	type retried struct {
		name string
		sess *mongo.Session
		cmd  bson.D
		// fields compares these fields of the reply.
		fields []string
		first  bson.Raw
	}
	ops := []*retried{
		{name: "update $inc", cmd: bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}}}}},
			{Key: "txnNumber", Value: int64(5)}}, fields: []string{"n", "nModified"}},
		{name: "insert", cmd: bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 3}, {Key: "v", Value: 0}}}},
			{Key: "txnNumber", Value: int64(7)}}, fields: []string{"n", "writeErrors"}},
		{name: "findAndModify new", cmd: bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 2}}},
			{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 10}}}}}, {Key: "new", Value: true},
			{Key: "txnNumber", Value: int64(9)}}, fields: []string{"value", "lastErrorObject"}},
		{name: "findAndModify old", cmd: bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}},
			{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}}},
			{Key: "txnNumber", Value: int64(11)}}, fields: []string{"value", "lastErrorObject"}},
		{name: "findAndModify remove", cmd: bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: 3}}},
			{Key: "remove", Value: true}, {Key: "txnNumber", Value: int64(13)}}, fields: []string{"value", "lastErrorObject"}},
	}
	// The sessions whose txnNumbers the test sends by hand come from a client of their own:
	// d.Client's implicit sessions (InsertOne below) go back to its pool with txnNumbers of
	// their own, and a session taken from the pool again would collide with them (a
	// "retry" answering another write's reply).
	sessClient := Connect(t, d.URI)
	db := sessClient.Database("sm")
	send := func(op *retried) bson.Raw {
		t.Helper()
		raw, err := db.RunCommand(mongo.NewSessionContext(ctx, op.sess), op.cmd).Raw()
		if err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		return raw
	}
	for _, op := range ops {
		sess, err := sessClient.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.EndSession(context.Background())
		op.sess = sess
		op.first = send(op)
	}
	// The writes ran once: these are the documents every retry must leave.
	want := map[int32]bson.M{
		1: {"_id": int32(1), "k": int32(1), "v": int32(1), "w": int32(1)},
		2: {"_id": int32(2), "k": int32(2), "v": int32(10)},
	}
	check := func(when string) {
		t.Helper()
		for _, op := range ops {
			again := send(op)
			for _, f := range op.fields {
				if a, b := op.first.Lookup(f), again.Lookup(f); !a.Equal(b) {
					t.Errorf("%s: %s retried answers %s: %v, first answered %v (retry reply %s)", when, op.name, f, b, a, again)
				}
			}
		}
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		got := map[int32]bson.M{}
		for _, doc := range docs {
			got[doc["_id"].(int32)] = doc
		}
		for id, w := range want {
			if g := got[id]; !sameDoc(g, w) {
				t.Errorf("%s: document %d is %v, want %v (a retry ran again)", when, id, g, w)
			}
		}
		if _, ok := got[3]; ok || len(got) != len(want)+1 {
			t.Errorf("%s: documents %v: _id 3 (inserted, then removed) must be gone, the others left", when, docs)
		}
	}
	check("before the move")
	// The first replies are what we expect of the writes themselves.
	if n, _ := ops[0].first.Lookup("nModified").AsInt64OK(); n != 1 {
		t.Fatalf("update's first reply %s", ops[0].first)
	}
	if v, _ := ops[2].first.Lookup("value", "v").AsInt64OK(); v != 10 {
		t.Fatalf("findAndModify's first reply %s", ops[2].first)
	}
	if v, _ := ops[3].first.Lookup("value", "v").AsInt64OK(); v != 1 || ops[3].first.Lookup("value", "w").Type != 0 {
		t.Fatalf("findAndModify (old)'s first reply %s", ops[3].first)
	}

	// While the chunk moves, a writer sends retryable $inc's of document 4, each in a session
	// of its own (kept open: an ended session's lsid is reused by the driver): those that
	// land during the clone reach the recipient through the donor's tracking, not its
	// initial scan.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: 4}, {Key: "c", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	var during []*retried
	moved := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		writerDone <- func() error {
			for i := 0; ; i++ {
				select {
				case <-moved:
					if i >= 3 {
						return nil
					}
				default:
				}
				sess, err := sessClient.StartSession()
				if err != nil {
					return err
				}
				op := &retried{name: fmt.Sprintf("concurrent $inc %d", i), sess: sess, fields: []string{"n", "nModified"},
					cmd: bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
						bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 4}, {Key: "k", Value: 4}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "c", Value: 1}}}}}}}},
						{Key: "txnNumber", Value: int64(1)}}}
				during = append(during, op)
				// A driver retries a failed retryable write with the same lsid and txnNumber.
				for attempt := 0; ; attempt++ {
					raw, err := db.RunCommand(mongo.NewSessionContext(ctx, sess), op.cmd).Raw()
					if err == nil {
						op.first = raw
						break
					}
					if attempt == 20 || ctx.Err() != nil {
						return fmt.Errorf("%s: %w", op.name, err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}()
	// _waitForDelete: the move back must not wait out the donor's orphan cleanup delay.
	run(bson.D{{Key: "moveChunk", Value: "sm.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: s1},
		{Key: "_waitForDelete", Value: true}})
	close(moved)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	for _, op := range during {
		defer op.sess.EndSession(context.Background())
		if n, _ := op.first.Lookup("nModified").AsInt64OK(); n != 1 {
			t.Fatalf("%s answered %s", op.name, op.first)
		}
	}
	ops = append(ops, during...)
	want[4] = bson.M{"_id": int32(4), "k": int32(4), "c": int32(len(during))}
	t.Logf("%d retryable writes ran while the chunk moved", len(during))
	check("after the move to " + s1)
	// And back: the recipient's migrated entries are migrated again.
	run(bson.D{{Key: "moveChunk", Value: "sm.c"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: s0},
		{Key: "_waitForDelete", Value: true}})
	check("after the move back to " + s0)
}

func sameDoc(a, b bson.M) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if av, ok := a[k]; !ok || av != v {
			return false
		}
	}
	return true
}
