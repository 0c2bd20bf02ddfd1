package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// TestSnapshotTransactionAcrossMigration (issue 14 acceptance: "A snapshot transaction started
// before a moveChunk reads the old owner's data, without duplicates"; spec: sharding.md
// "Routing", snapshot reads): a snapshot transaction's reads are routed, and filtered on each
// shard, by the chunk ownership at its atClusterTime, from config.chunks' history. Chunks of
// snap.c by _id: A = [MinKey, 0) on s1, B = [0, 5) and C = [5, MaxKey) on s0; documents
// _id -10..9.
//
//   - started before the move: B moves to s1 and the donor's range deleter (no delay) deletes
//     it; the transaction still reads B's documents from s0 at its time (the deletes are newer
//     than its snapshot), once each; a new transaction reads them from s1.
//   - started between the clone and the commit (the migration held at moveChunkHangAtStep5):
//     the recipient already holds the clone at the transaction's time; after the commit the
//     transaction's reads still route B to the donor, and the recipient, read for C, filters
//     the clone out by the ownership of that time (filtered by the current ownership it
//     would return B twice).
func TestSnapshotTransactionAcrossMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "orphanCleanupDelaySecs=0", "--setParameter", "enableTestCommands=1",
		// The snapshot reads outside a transaction read at a time a few seconds old.
		"--setParameter", "minSnapshotHistoryWindowInSeconds=120"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := clusterCmds{t: t, ctx: ctx, admin: d.Client.Database("admin")}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	c.run(bson.D{{Key: "enableSharding", Value: "snap"}, {Key: "primaryShard", Value: s0}})
	c.run(bson.D{{Key: "shardCollection", Value: "snap.c"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	for _, at := range []int{0, 5} {
		c.run(bson.D{{Key: "split", Value: "snap.c"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: at}}}})
	}
	move := func(id int, to string) bson.D {
		return bson.D{{Key: "moveChunk", Value: "snap.c"}, {Key: "find", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "to", Value: to}}
	}
	c.run(move(-1, s1))
	coll := d.Client.Database("snap").Collection("c")
	var all, inB []int
	var docs []any
	for i := -10; i < 10; i++ {
		all = append(all, i)
		if i >= 0 && i < 5 {
			inB = append(inB, i)
		}
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// B's documents by an inclusive range inside B: the router targets B's owner only ($lt 5
	// would reach C's chunk too, as the bound is inclusive for targeting).
	bRange := bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 0}, {Key: "$lte", Value: 4}}}}
	// read returns the _ids a find returns, in the order returned (a duplicate stays one).
	read := func(ctx context.Context, filter bson.D) []int {
		t.Helper()
		cur, err := coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(3))
		if err != nil {
			t.Fatalf("find %v: %v", filter, err)
		}
		var got []struct {
			ID int `bson:"_id"`
		}
		if err := cur.All(ctx, &got); err != nil {
			t.Fatalf("find %v: %v", filter, err)
		}
		ids := make([]int, len(got))
		for i, g := range got {
			ids[i] = g.ID
		}
		return ids
	}
	expect := func(what string, got, want []int) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	snapshotTxn := func() (*mongo.Session, context.Context) {
		t.Helper()
		s, err := d.Client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.EndSession(context.Background()) })
		if err := s.StartTransaction(options.Transaction().SetReadConcern(readconcern.Snapshot())); err != nil {
			t.Fatal(err)
		}
		return s, mongo.NewSessionContext(ctx, s)
	}
	// settle waits until the donor's range deletion tasks of snap.c are done, then has every
	// node refresh by a read outside a transaction (a statement after a transaction's first
	// may not be retried after a stale version, as in MongoDB).
	settle := func(donor int) {
		t.Helper()
		tasks := d.Shards[donor].Client.Database("config").Collection("rangeDeletions")
		for {
			n, err := tasks.CountDocuments(ctx, bson.D{{Key: "nss", Value: "snap.c"}})
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("range deletion on %s never finished: %d tasks", d.Shards[donor].Topology.Name, n)
			case <-time.After(50 * time.Millisecond):
			}
		}
		expect("a read outside a transaction after the move", read(ctx, bson.D{}), all)
	}
	direct := func(shard int) []int {
		t.Helper()
		cur, err := d.Shards[shard].Client.Database("snap").Collection("c").Find(ctx, bRange, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []struct {
			ID int `bson:"_id"`
		}
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		ids := []int{}
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		return ids
	}

	// snapshotRead is a find of collection name outside a transaction with readConcern
	// snapshot, at ts unless nil; it returns the _ids and the reply's cursor.atClusterTime.
	snapshotRead := func(name string, ts *bson.Timestamp, filter bson.D) ([]int, *bson.Timestamp, error) {
		rc := bson.D{{Key: "level", Value: "snapshot"}}
		if ts != nil {
			rc = append(rc, bson.E{Key: "atClusterTime", Value: *ts})
		}
		raw, err := coll.Database().RunCommand(ctx, bson.D{{Key: "find", Value: name}, {Key: "filter", Value: filter},
			{Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "readConcern", Value: rc}}).Raw()
		if err != nil {
			return nil, nil, err
		}
		var res struct {
			Cursor struct {
				FirstBatch []struct {
					ID int `bson:"_id"`
				} `bson:"firstBatch"`
				AtClusterTime *bson.Timestamp `bson:"atClusterTime"`
			} `bson:"cursor"`
		}
		if err := bson.Unmarshal(raw, &res); err != nil {
			return nil, nil, err
		}
		ids := []int{}
		for _, d := range res.Cursor.FirstBatch {
			ids = append(ids, d.ID)
		}
		return ids, res.Cursor.AtClusterTime, nil
	}
	snapshotFind := func(ts bson.Timestamp, filter bson.D) ([]int, error) {
		ids, _, err := snapshotRead("c", &ts, filter)
		return ids, err
	}

	t.Run("started before the move", func(t *testing.T) {
		// A cluster time after the inserts, before the move, for reads outside a transaction.
		sess, err := d.Client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.EndSession(ctx)
		expect("a read before the move", read(mongo.NewSessionContext(ctx, sess), bson.D{}), all)
		before := *sess.OperationTime()
		s, sctx := snapshotTxn()
		expect("first read in the transaction", read(sctx, bson.D{}), all)
		c.run(move(0, s1))
		settle(0)
		expect("B's documents left on the donor (newest data)", direct(0), []int{})
		expect("the transaction's read after the move", read(sctx, bson.D{}), all)
		expect("the transaction's read of the moved range", read(sctx, bRange), inB)
		if err := s.CommitTransaction(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		// Outside a transaction, a snapshot read at a time before the move routes the same way.
		got, err := snapshotFind(before, bRange)
		if err != nil {
			t.Fatalf("snapshot read at %v: %v", before, err)
		}
		expect("a snapshot read before the move, outside a transaction", got, inB)
		// Older than the chunks' history (the collection did not exist): StaleChunkHistory.
		_, err = snapshotFind(bson.Timestamp{T: before.T - 3600, I: 1}, bRange)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 250 ||
			ce.Message != fmt.Sprintf("Cannot find shardId the chunk belonged to at cluster time Timestamp(%d, 1)", before.T-3600) {
			t.Errorf("a snapshot read older than the chunk history: %v, want StaleChunkHistory", err)
		}
		s2, sctx2 := snapshotTxn()
		expect("a new transaction's read of the moved range", read(sctx2, bRange), inB)
		expect("a new transaction's read", read(sctx2, bson.D{}), all)
		_ = s2.AbortTransaction(ctx)
	})

	t.Run("started between the clone and the commit", func(t *testing.T) {
		// B moves back to s0; s1 (the donor) holds the migration after the clone.
		fp := d.Shards[1].Client.Database("admin")
		setFP := func(mode string) bson.Raw {
			t.Helper()
			res, err := fp.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "moveChunkHangAtStep5"}, {Key: "mode", Value: mode}}).Raw()
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		setFP("alwaysOn")
		moved := make(chan error, 1)
		go func() { moved <- c.admin.RunCommand(ctx, move(0, s0)).Err() }()
		for {
			if n, _ := setFP("alwaysOn").Lookup("count").AsInt64OK(); n > 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("the migration never reached moveChunkHangAtStep5")
			case err := <-moved:
				t.Fatalf("the migration ended before the fail point: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
		}
		expect("the recipient's clone (newest data)", direct(0), inB)
		// A read of C through the router gossips the recipient's cluster time to it: the
		// transaction's atClusterTime then comes after the clone's writes.
		expect("C outside a transaction", read(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 5}}}}), all[15:])
		s, sctx := snapshotTxn()
		expect("first read in the transaction", read(sctx, bson.D{}), all)
		setFP("off")
		if err := <-moved; err != nil {
			t.Fatalf("moveChunk: %v", err)
		}
		settle(1)
		expect("the transaction's read after the commit", read(sctx, bson.D{}), all)
		expect("the transaction's read of the moved range", read(sctx, bRange), inB)
		expect("the transaction's read of B and C (C on the recipient)", read(sctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 0}}}}), all[10:])
		if err := s.CommitTransaction(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	})

	// Snapshot reads outside a transaction without atClusterTime: the router selects the time
	// for a sharded collection, the shard for an unsharded one; either way the reply reports
	// it, and a read at it later sees the same documents.
	t.Run("snapshot reads outside a transaction report their time", func(t *testing.T) {
		for _, name := range []string{"c", "u"} {
			if name == "u" {
				if _, err := coll.Database().Collection("u").InsertMany(ctx, docs); err != nil {
					t.Fatal(err)
				}
			}
			got, at, err := snapshotRead(name, nil, bson.D{})
			if err != nil || at == nil {
				t.Fatalf("%s: snapshot read: %v, atClusterTime %v", name, err, at)
			}
			expect(name+": snapshot read", got, all)
			if _, err := coll.Database().Collection(name).InsertOne(ctx, bson.D{{Key: "_id", Value: 100}}); err != nil {
				t.Fatal(err)
			}
			got, _, err = snapshotRead(name, at, bson.D{})
			if err != nil {
				t.Fatalf("%s: read at %v: %v", name, *at, err)
			}
			expect(name+": read at the reported time after an insert", got, all)
		}
	})
}
