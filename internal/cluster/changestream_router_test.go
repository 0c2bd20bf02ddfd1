package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// csrEvent is what the router tests keep of an event.
type csrEvent struct {
	op   csOp
	data string
	ct   bson.Timestamp
	id   bson.Raw // the resume token
	key  any      // documentKey._id
	ns   string   // "db.coll"
}

// csrRead reads events from cs until one matches stop (included), or ctx ends.
func csrRead(ctx context.Context, cs *mongo.ChangeStream, stop func(ev bson.M) bool) ([]csrEvent, error) {
	var out []csrEvent
	for cs.Next(ctx) {
		var ev bson.M
		if err := cs.Decode(&ev); err != nil {
			return out, err
		}
		e := csrEvent{id: bson.Raw(append([]byte(nil), cs.Current.Lookup("_id").Document()...))}
		e.data, _ = ev["_id"].(bson.M)["_data"].(string)
		e.ct, _ = ev["clusterTime"].(bson.Timestamp)
		if ns, ok := ev["ns"].(bson.M); ok {
			e.ns = fmt.Sprintf("%v.%v", ns["db"], ns["coll"])
		}
		if dk, ok := ev["documentKey"].(bson.M); ok {
			e.key = dk["_id"]
			e.op = csEventOp(ev)
		} else {
			e.op = csOp(fmt.Sprint(ev["operationType"]))
		}
		out = append(out, e)
		if stop(ev) {
			return out, nil
		}
	}
	return out, fmt.Errorf("stream ended after %d events: %w", len(out), cs.Err())
}

// csrIsEnd recognises the marker insert each phase ends with.
func csrIsEnd(marker string) func(ev bson.M) bool {
	return func(ev bson.M) bool {
		dk, ok := ev["documentKey"].(bson.M)
		return ok && ev["operationType"] == "insert" && dk["_id"] == marker
	}
}

// csrCheckOrder checks the merge's order: clusterTime never goes back and the tokens
// strictly increase (so no event comes twice).
func csrCheckOrder(t *testing.T, what string, evs []csrEvent) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].ct.Compare(evs[i-1].ct) < 0 {
			t.Fatalf("%s: event %d (%s) at %v after %v", what, i, evs[i].op, evs[i].ct, evs[i-1].ct)
		}
		if evs[i].data <= evs[i-1].data {
			t.Fatalf("%s: event %d (%s) token %s not after %s", what, i, evs[i].op, evs[i].data, evs[i-1].data)
		}
	}
}

// csrShardsSeen counts the events on each side of the split point 0 (shard0 below, shard1
// from it).
func csrShardsSeen(evs []csrEvent) (below, above int) {
	for _, e := range evs {
		switch k := e.key.(type) {
		case int32:
			if k < 0 {
				below++
			} else {
				above++
			}
		case int64:
			if k < 0 {
				below++
			} else {
				above++
			}
		}
	}
	return below, above
}

// TestChangeStreamThroughRouter: change streams merged by humongos over a collection sharded
// on _id with a chunk on each shard. A collection stream returns each change once in cluster
// time order; resuming from a token through the router continues right after it; a database
// and a cluster stream see both shards' events; with a chunk migrating back and forth under
// a workload, the stream holds each acknowledged change exactly once and none of the
// migration's own inserts and deletes.
func TestChangeStreamThroughRouter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{
		"--setParameter", "periodicNoopIntervalSecs=1", "--setParameter", "orphanCleanupDelaySecs=0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	run(bson.D{{Key: "balancerStop", Value: 1}})
	run(bson.D{{Key: "enableSharding", Value: "csr"}, {Key: "primaryShard", Value: s0}})
	run(bson.D{{Key: "shardCollection", Value: "csr.c"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	run(bson.D{{Key: "split", Value: "csr.c"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: 0}}}})
	run(bson.D{{Key: "split", Value: "csr.c"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: 1000}}}})
	run(bson.D{{Key: "moveChunk", Value: "csr.c"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 0}}}, {Key: "to", Value: s1}})
	run(bson.D{{Key: "moveChunk", Value: "csr.c"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 1000}}}, {Key: "to", Value: s1}})
	coll := d.Client.Database("csr").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	opts := options.ChangeStream().SetMaxAwaitTime(300 * time.Millisecond)

	// Phase 1: the three kinds of stream over a sequential workload on both shards.
	collCS, err := coll.Watch(ctx, mongo.Pipeline{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer collCS.Close(context.Background())
	dbCS, err := d.Client.Database("csr").Watch(ctx, mongo.Pipeline{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer dbCS.Close(context.Background())
	clusterCS, err := d.Client.Watch(ctx, mongo.Pipeline{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer clusterCS.Close(context.Background())

	var acked []csOp
	for i := 1; i <= 20; i++ {
		for _, id := range []int{-i, i} { // shard0, shard1
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: i}}); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, csOp(fmt.Sprintf("insert:%d", id)))
			if i%3 == 0 {
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: i}}}}); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, csOp(fmt.Sprintf("update:%d:%d", id, i)))
			}
			if i%4 == 0 {
				if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, csOp(fmt.Sprintf("delete:%d", id)))
			}
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "end1"}}); err != nil {
		t.Fatal(err)
	}
	evs, err := csrRead(ctx, collCS, csrIsEnd("end1"))
	if err != nil {
		t.Fatal(err)
	}
	csrCheckOrder(t, "collection stream", evs)
	// One client writing in sequence: the router gossips each write's cluster time to the
	// next shard, so the events come in the order the writes were acknowledged.
	checkOps := func(name string, evs []csrEvent) {
		t.Helper()
		var got []csOp
		for _, e := range evs[:len(evs)-1] {
			if e.ns == "csr.c" {
				got = append(got, e.op)
			}
		}
		if strings.Join(opStrings(got), " ") != strings.Join(opStrings(acked), " ") {
			t.Fatalf("%s stream:\n got %v\nwant %v", name, got, acked)
		}
		if below, above := csrShardsSeen(evs); below == 0 || above == 0 {
			t.Fatalf("%s stream: %d events on shard0, %d on shard1", name, below, above)
		}
	}
	checkOps("collection", evs)
	for name, cs := range map[string]*mongo.ChangeStream{"database": dbCS, "cluster": clusterCS} {
		evs, err := csrRead(ctx, cs, csrIsEnd("end1"))
		if err != nil {
			t.Fatalf("%s stream: %v", name, err)
		}
		csrCheckOrder(t, name+" stream", evs)
		checkOps(name, evs)
	}

	// Resume through the router from the middle: exactly the events after it.
	k := len(evs) / 2
	resumed, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond).SetResumeAfter(evs[k].id))
	if err != nil {
		t.Fatal(err)
	}
	rest, err := csrRead(ctx, resumed, csrIsEnd("end1"))
	resumed.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != len(evs)-k-1 || rest[0].data != evs[k+1].data || rest[len(rest)-1].data != evs[len(evs)-1].data {
		t.Fatalf("resumed after event %d of %d: %d events, from %s (want %s)", k, len(evs), len(rest), rest[0].op, evs[k+1].op)
	}

	// Phase 2: a chunk moving back and forth under a concurrent workload.
	w := &csWriter{uncertain: map[csOp]bool{}}
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 100; wctx.Err() == nil; i++ {
			id := i
			if rng.IntN(2) == 0 {
				id = -i
			}
			_, err := coll.InsertOne(wctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: i}})
			w.note(err, csOp(fmt.Sprintf("insert:%d", id)))
			if err == nil && i%3 == 0 {
				_, err := coll.UpdateOne(wctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: i}}}})
				w.note(err, csOp(fmt.Sprintf("update:%d:%d", id, i)))
			}
			if err == nil && i%5 == 0 {
				_, err := coll.DeleteOne(wctx, bson.D{{Key: "_id", Value: id}})
				w.note(err, csOp(fmt.Sprintf("delete:%d", id)))
			}
		}
	})
	moves := 0
	for to := s0; moves < 4 && ctx.Err() == nil; {
		err := admin.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: "csr.c"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 0}}},
			{Key: "to", Value: to}, {Key: "_waitForDelete", Value: true}}).Err()
		if err != nil {
			var ce mongo.CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("moveChunk to %s: %v", to, err)
			}
			t.Logf("moveChunk to %s: %v (retrying)", to, err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		moves++
		if to == s0 {
			to = s1
		} else {
			to = s0
		}
	}
	stopWriter()
	wg.Wait()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "end2"}}); err != nil {
		t.Fatal(err)
	}
	evs, err = csrRead(ctx, collCS, csrIsEnd("end2"))
	if err != nil {
		t.Fatal(err)
	}
	csrCheckOrder(t, "stream during migrations", evs)
	seen := map[csOp]bool{}
	for _, e := range evs[:len(evs)-1] {
		if seen[e.op] {
			t.Fatalf("event %s delivered twice", e.op)
		}
		seen[e.op] = true
	}
	for _, op := range w.acked {
		if !seen[op] {
			t.Fatalf("acknowledged change %s missing from the stream (%d events, %d acknowledged)", op, len(evs)-1, len(w.acked))
		}
		delete(seen, op)
	}
	for op := range seen {
		if !w.uncertain[op] {
			t.Fatalf("event %s was never written by the workload (a migration's own write?)", op)
		}
	}
	t.Logf("%d moves, %d acknowledged changes, %d uncertain", moves, len(w.acked), len(w.uncertain))
}

func opStrings(ops []csOp) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}
