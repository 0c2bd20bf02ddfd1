package cluster

import (
	"bytes"
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
	full bson.Raw // fullDocument (nil when null or absent)
}

// csrRead reads events from cs until one matches stop (included), or ctx ends, or 30 s
// pass (every phase's events come within seconds).
func csrRead(ctx context.Context, cs *mongo.ChangeStream, stop func(e csrEvent) bool) ([]csrEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []csrEvent
	for cs.Next(ctx) {
		ev := cs.Current
		e := csrEvent{id: bson.Raw(append([]byte(nil), ev.Lookup("_id").Document()...))}
		e.data, _ = ev.Lookup("_id", "_data").StringValueOK()
		t, i, _ := ev.Lookup("clusterTime").TimestampOK()
		e.ct = bson.Timestamp{T: t, I: i}
		db, _ := ev.Lookup("ns", "db").StringValueOK()
		coll, _ := ev.Lookup("ns", "coll").StringValueOK()
		e.ns = db + "." + coll
		op, _ := ev.Lookup("operationType").StringValueOK()
		e.key = csrValue(ev.Lookup("documentKey", "_id"))
		if d, ok := ev.Lookup("fullDocument").DocumentOK(); ok {
			e.full = append(bson.Raw(nil), d...)
		}
		switch op {
		case "update":
			e.op = csOp(fmt.Sprintf("update:%v:%v", e.key, csrValue(ev.Lookup("updateDescription", "updatedFields", "u"))))
		case "insert", "delete":
			e.op = csOp(fmt.Sprintf("%s:%v", op, e.key))
		default:
			e.op = csOp(op)
		}
		out = append(out, e)
		if stop(e) {
			return out, nil
		}
	}
	return out, fmt.Errorf("stream ended after %d events: %w", len(out), cs.Err())
}

// csrValue is an int or string value as the workload wrote it (nil otherwise).
func csrValue(v bson.RawValue) any {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32())
	case bson.TypeInt64:
		return v.Int64()
	case bson.TypeString:
		return v.StringValue()
	}
	return nil
}

// csrMarkers are a phase's end markers, one in a chunk that stays on each shard: without
// the router's cluster time gossiped to every shard (see checkOps), a shard's changes may
// sort after another shard's later marker, so a reader waits for both.
func csrMarkers(phase int) []any { return []any{-1000000 - phase, fmt.Sprintf("end%d", phase)} }

// csrWriteEnd inserts a phase's end markers.
func csrWriteEnd(ctx context.Context, coll *mongo.Collection, phase int) error {
	for _, id := range csrMarkers(phase) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			return err
		}
	}
	return nil
}

// csrStop stops a reader once it has seen both of a phase's markers.
func csrStop(phase int) func(e csrEvent) bool {
	left := map[csOp]bool{}
	for _, id := range csrMarkers(phase) {
		left[csOp(fmt.Sprintf("insert:%v", id))] = true
	}
	return func(e csrEvent) bool {
		delete(left, e.op)
		return len(left) == 0
	}
}

// csrMarker reports whether an event is an end marker's.
func csrMarker(e csrEvent) bool {
	k, ok := e.key.(int64)
	_, str := e.key.(string)
	return ok && k <= -1000000 || str
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
		if k, ok := e.key.(int64); ok && k < 0 {
			below++
		} else if ok {
			above++
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
	t0 := time.Now()
	opts := options.ChangeStream().SetMaxAwaitTime(300 * time.Millisecond)

	// A client gossips a cluster time a minute ahead of the shards' clocks: the streams
	// start at the router's time, so the router must pass it to every shard when it opens
	// them, or the writes below would land before the start and be missed.
	ahead := bson.Timestamp{T: uint32(time.Now().Unix()) + 60, I: 1}
	if r := rawCommand(t, d.Routers[0].Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: ahead},
			{Key: "signature", Value: bson.D{{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}}}}}); r.Lookup("ok").Double() != 1 {
		t.Fatalf("ping with $clusterTime: %v", r)
	}

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
	if err := csrWriteEnd(ctx, coll, 1); err != nil {
		t.Fatal(err)
	}
	evs, err := csrRead(ctx, collCS, csrStop(1))
	if err != nil {
		t.Fatal(err)
	}
	csrCheckOrder(t, "collection stream", evs)
	// Each change once, each shard's in the order they were acknowledged. (Not all of them
	// in acknowledgement order: the router does not gossip its cluster time to the shards
	// on every request, so a write on shard1 acknowledged after one on shard0 can get an
	// earlier timestamp.)
	checkOps := func(name string, evs []csrEvent) {
		t.Helper()
		var got [2][]string
		for _, e := range evs {
			if e.ns == "csr.c" && !csrMarker(e) {
				got[csrSide(e.op)] = append(got[csrSide(e.op)], string(e.op))
			}
		}
		var want [2][]string
		for _, op := range acked {
			want[csrSide(op)] = append(want[csrSide(op)], string(op))
		}
		for i := range got {
			if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
				t.Fatalf("%s stream, shard%d's changes:\n got %v\nwant %v", name, i, got[i], want[i])
			}
		}
		if below, above := csrShardsSeen(evs); below == 0 || above == 0 {
			t.Fatalf("%s stream: %d events on shard0, %d on shard1", name, below, above)
		}
	}
	checkOps("collection", evs)
	for name, cs := range map[string]*mongo.ChangeStream{"database": dbCS, "cluster": clusterCS} {
		evs, err := csrRead(ctx, cs, csrStop(1))
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
	rest, err := csrRead(ctx, resumed, csrStop(1))
	resumed.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tokens := func(evs []csrEvent) string {
		var b strings.Builder
		for _, e := range evs {
			b.WriteString(string(e.op) + "@" + e.data + " ")
		}
		return b.String()
	}
	if got, want := tokens(rest), tokens(evs[k+1:]); got != want {
		t.Fatalf("resumed after event %d of %d:\n got %s\nwant %s", k, len(evs), got, want)
	}

	// startAtOperationTime as given: from the first event's time, the same events.
	fromTime, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond).
		SetStartAtOperationTime(&evs[0].ct))
	if err != nil {
		t.Fatal(err)
	}
	again, err := csrRead(ctx, fromTime, csrStop(1))
	fromTime.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tokens(again), tokens(evs); got != want {
		t.Fatalf("startAtOperationTime %v:\n got %s\nwant %s", evs[0].ct, got, want)
	}
	// The user's stages run on the router after the merge; one changing _id fails the
	// stream with ChangeStreamFatalError.
	deletes, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"delete", "insert"}}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "fullDocument", Value: 0}}}}}, options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond).SetResumeAfter(evs[0].id))
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := csrRead(ctx, deletes, csrStop(1))
	deletes.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range filtered {
		if strings.HasPrefix(string(e.op), "update:") {
			t.Fatalf("$match let %s through", e.op)
		}
	}
	if len(filtered) == 0 || len(filtered) >= len(evs) {
		t.Fatalf("$match kept %d of %d events", len(filtered), len(evs))
	}
	badID, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "_id", Value: 1}}}}},
		options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond).SetStartAtOperationTime(&evs[0].ct))
	if err == nil {
		// The events may come in the first batch (the open fails) or a later one.
		for badID.Next(ctx) {
		}
		err = badID.Err()
		badID.Close(context.Background())
	}
	var ce mongo.ServerError
	if !errors.As(err, &ce) || !ce.HasErrorCode(280) {
		t.Fatalf("a pipeline changing _id: %v, want ChangeStreamFatalError (280)", err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{
		bson.D{{Key: "$changeStream", Value: bson.D{{Key: "allChangesForCluster", Value: true}, {Key: "showMigrationEvents", Value: true}}}}}},
		{Key: "cursor", Value: bson.D{}}}).Err(); !errors.As(err, &ce) || !ce.HasErrorCode(31123) {
		t.Fatalf("showMigrationEvents through the router: %v, want 31123", err)
	}

	t.Logf("phase 1 done at %v", time.Since(t0))
	// Phase 2: a chunk moving back and forth under a concurrent workload. A second stream
	// looks updated documents up through the router, wherever they are by then.
	lookupCS, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: bson.D{{Key: "$ne", Value: "delete"}}}}}}},
		options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond).SetFullDocument(options.UpdateLookup))
	if err != nil {
		t.Fatal(err)
	}
	defer lookupCS.Close(context.Background())
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
	for to := s0; moves < 10 && ctx.Err() == nil; {
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
	t.Logf("phase 2 workload and moves done at %v", time.Since(t0))
	if err := csrWriteEnd(ctx, coll, 2); err != nil {
		t.Fatal(err)
	}
	evs, err = csrRead(ctx, collCS, csrStop(2))
	if err != nil {
		t.Fatal(err)
	}
	csrCheckOrder(t, "stream during migrations", evs)
	seen := map[csOp]bool{}
	for _, e := range evs {
		if csrMarker(e) {
			continue
		}
		if seen[e.op] {
			t.Fatalf("event %s delivered twice", e.op)
		}
		seen[e.op] = true
	}
	for _, op := range w.acked {
		if !seen[op] {
			t.Fatalf("acknowledged change %s missing from the stream (%d events, %d acknowledged)", op, len(evs), len(w.acked))
		}
		delete(seen, op)
	}
	seenDelete := map[any]bool{}
	for _, e := range evs {
		if strings.HasPrefix(string(e.op), "delete:") {
			seenDelete[e.key] = true
		}
	}
	for op := range seen {
		if !w.uncertain[op] {
			t.Fatalf("event %s was never written by the workload (a migration's own write?)", op)
		}
	}
	// Each update's fullDocument is its document as of the lookup: the update's value, or
	// null once deleted (every document is updated at most once).
	t.Logf("phase 2 stream read at %v", time.Since(t0))
	looked, err := csrRead(ctx, lookupCS, csrStop(2))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range looked {
		if !strings.HasPrefix(string(e.op), "update:") {
			continue
		}
		if e.full == nil {
			if !seenDelete[e.key] {
				t.Fatalf("%s: fullDocument null, but the document was not deleted", e.op)
			}
			continue
		}
		found++
		if got := fmt.Sprintf("update:%v:%v", csrValue(e.full.Lookup("_id")), csrValue(e.full.Lookup("u"))); got != string(e.op) {
			t.Fatalf("%s: fullDocument %v", e.op, e.full)
		}
	}
	if found == 0 {
		t.Fatalf("no update looked up its document (%d events)", len(looked))
	}
	t.Logf("%d moves, %d acknowledged changes, %d uncertain; done at %v", moves, len(w.acked), len(w.uncertain), time.Since(t0))

	// Dropping the collection invalidates the stream on each shard: the router returns one
	// invalidate, last, and closes the cursor.
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	tail, err := csrRead(ctx, collCS, func(e csrEvent) bool { return e.op == "invalidate" })
	if err != nil {
		t.Fatal(err)
	}
	delivered := map[csOp]bool{}
	for _, e := range evs {
		delivered[e.op] = true
	}
	drops := 0
	for _, e := range tail[:len(tail)-1] {
		// A change whose acknowledgement was lost may commit after the markers: it may come
		// now, once.
		if w.uncertain[e.op] && !delivered[e.op] {
			delivered[e.op] = true
			continue
		}
		if e.op != "drop" {
			t.Fatalf("after the drop: %s before the invalidate", e.op)
		}
		drops++
	}
	// Both shards dropped their copies; the shard that is not the primary marks its drop
	// fromMigrate, so the stream reports one.
	if drops != 1 {
		t.Fatalf("%d drop events before the invalidate, want 1", drops)
	}
	if collCS.Next(ctx) || collCS.Err() != nil || collCS.ID() != 0 {
		t.Fatalf("the stream goes on after its invalidate: %v, id %d", collCS.Err(), collCS.ID())
	}
}

// csrSide is the shard of phase 1's change: 0 for negative ids, 1 otherwise.
func csrSide(op csOp) int {
	if _, id, _ := strings.Cut(string(op), ":"); strings.HasPrefix(id, "-") {
		return 0
	}
	return 1
}

// TestChangeStreamWatchesNewShard: a stream opened through the router on a one-shard
// cluster sees the changes made on a shard added afterwards, once a chunk moved there, and
// none of the migration's own writes.
func TestChangeStreamWatchesNewShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 1}, Options{Args: []string{"--setParameter", "periodicNoopIntervalSecs=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(cmd bson.D) { t.Helper(); runAdmin(t, ctx, d.Client, cmd) }
	run(bson.D{{Key: "balancerStop", Value: 1}})
	run(bson.D{{Key: "enableSharding", Value: "nsh"}})
	run(bson.D{{Key: "shardCollection", Value: "nsh.c"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}})
	run(bson.D{{Key: "split", Value: "nsh.c"}, {Key: "middle", Value: bson.D{{Key: "_id", Value: 0}}}})
	coll := d.Client.Database("nsh").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	for _, id := range []int{-1, 1} {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: -2}}); err != nil {
		t.Fatal(err)
	}
	// A getMore on the one-shard stream before the new shard exists.
	before, err := csrRead(ctx, cs, func(e csrEvent) bool { return e.op == "insert:-2" })
	if err != nil {
		t.Fatal(err)
	}

	second := d.StartSet(t, "shard1", 1, "--shardsvr")
	if err := d.AddShard(ctx, second.ConnectionString()); err != nil {
		t.Fatal(err)
	}
	run(bson.D{{Key: "moveChunk", Value: "nsh.c"}, {Key: "find", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "to", Value: "shard1"}})
	// Changes on the new shard (the moved document and a new one), then one on the old.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: -3}}); err != nil {
		t.Fatal(err)
	}
	// The shards' clocks order changes on different shards, not the real time: read until
	// all three came, then check each shard's own order.
	left := map[csOp]bool{"update:1:1": true, "insert:2": true, "insert:-3": true}
	after, err := csrRead(ctx, cs, func(e csrEvent) bool { delete(left, e.op); return len(left) == 0 })
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]string
	for _, e := range append(before, after...) {
		got[csrSide(e.op)] = append(got[csrSide(e.op)], string(e.op))
	}
	if g := strings.Join(got[0], " "); g != "insert:-2 insert:-3" {
		t.Fatalf("the first shard's events: %s", g)
	}
	if g := strings.Join(got[1], " "); g != "update:1:1 insert:2" {
		t.Fatalf("the new shard's events: %s (no migration write may show)", g)
	}
	csrCheckOrder(t, "stream over a new shard", append(before, after...))

	// On a collection sharded on {a: 1}, every event's documentKey is the shard key and _id
	// (the shards log MongoDB's documentKey in the entries).
	run(bson.D{{Key: "shardCollection", Value: "nsh.k"}, {Key: "key", Value: bson.D{{Key: "a", Value: 1}}}})
	kc := d.Client.Database("nsh").Collection("k", options.Collection().SetWriteConcern(writeconcern.Majority()))
	ks, err := kc.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close(context.Background())
	if _, err := kc.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "a", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.UpdateOne(ctx, bson.D{{Key: "a", Value: "x"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.DeleteOne(ctx, bson.D{{Key: "a", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"insert", "update", "delete"} {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		ok := ks.Next(rctx)
		rcancel()
		if !ok {
			t.Fatalf("no %s event: %v", op, ks.Err())
		}
		got, _ := ks.Current.Lookup("operationType").StringValueOK()
		if key := ks.Current.Lookup("documentKey").Document().String(); got != op || key != `{"a": "x","_id": {"$numberInt":"7"}}` {
			t.Fatalf("%s event: documentKey %s, want {a, _id}", got, key)
		}
	}

	// $changeStreamSplitLargeEvent through the router: an update with 9 MB pre- and
	// post-images comes as two fragments; resumed after the first, the stream gives the
	// second.
	if err := d.Client.Database("nsh").CreateCollection(ctx, "big", options.CreateCollection().
		SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	big := d.Client.Database("nsh").Collection("big", options.Collection().SetWriteConcern(writeconcern.Majority()))
	split := mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	images := func() *options.ChangeStreamOptionsBuilder {
		return options.ChangeStream().SetFullDocument(options.Required).SetFullDocumentBeforeChange(options.Required)
	}
	bs, err := big.Watch(ctx, split, images())
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close(context.Background())
	if _, err := big.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: strings.Repeat("x", 9<<20)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := big.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	var frags []bson.Raw
	for len(frags) < 3 {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		ok := bs.Next(rctx)
		rcancel()
		if !ok {
			t.Fatalf("after %d events: %v", len(frags), bs.Err())
		}
		frags = append(frags, append(bson.Raw(nil), bs.Current...))
	}
	if op, _ := frags[0].Lookup("operationType").StringValueOK(); op != "insert" || frags[0].Lookup("splitEvent").Type != 0 {
		t.Fatalf("the insert (9 MB, whole): %s", op)
	}
	for i, f := range frags[1:] {
		se, ok := f.Lookup("splitEvent").DocumentOK()
		if !ok || se.Lookup("fragment").Int32() != int32(i+1) || se.Lookup("of").Int32() != 2 {
			t.Fatalf("fragment %d: splitEvent %v", i+1, f.Lookup("splitEvent"))
		}
	}
	rs, err := big.Watch(ctx, split, images().SetResumeAfter(frags[1].Lookup("_id").Document()))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(context.Background())
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if !rs.Next(rctx) {
		t.Fatalf("resumed after fragment 1: %v", rs.Err())
	}
	if !bytes.Equal(rs.Current.Lookup("_id").Value, frags[2].Lookup("_id").Value) {
		t.Fatalf("resumed after fragment 1: %v, want fragment 2", rs.Current.Lookup("splitEvent"))
	}

	// Explain: the split (the shards' $changeStream, the router's merge and $match) and
	// each shard's explain.
	var ex struct {
		MergeType     string `bson:"mergeType"`
		SplitPipeline struct {
			ShardsPart []bson.Raw `bson:"shardsPart"`
			MergerPart []bson.Raw `bson:"mergerPart"`
		} `bson:"splitPipeline"`
		Shards map[string]bson.Raw `bson:"shards"`
	}
	if err := d.Client.Database("nsh").RunCommand(ctx, bson.D{{Key: "aggregate", Value: "c"}, {Key: "explain", Value: true},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}, bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}}}).Decode(&ex); err != nil {
		t.Fatal(err)
	}
	if ex.MergeType != "mongos" || len(ex.SplitPipeline.ShardsPart) != 1 || len(ex.SplitPipeline.MergerPart) != 2 || len(ex.Shards) != 2 {
		t.Fatalf("explain: %+v", ex)
	}
}
