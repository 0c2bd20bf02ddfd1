package commands_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/server"
)

// nextEvent reads the stream's next event (failing t after 10 s).
func nextEvent(t *testing.T, cs *mongo.ChangeStream) bson.M {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !cs.Next(ctx) {
		t.Fatalf("no event: %v", cs.Err())
	}
	var ev bson.M
	if err := cs.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	return csToM(ev).(bson.M)
}

// csToM turns the driver's nested bson.D into bson.M, so events compare as maps.
func csToM(v any) any {
	switch x := v.(type) {
	case bson.D:
		m := bson.M{}
		for _, e := range x {
			m[e.Key] = csToM(e.Value)
		}
		return m
	case bson.M:
		for k, e := range x {
			x[k] = csToM(e)
		}
		return x
	case bson.A:
		for i, e := range x {
			x[i] = csToM(e)
		}
		return x
	}
	return v
}

func wantEvent(t *testing.T, ev bson.M, op string, fields bson.M) {
	t.Helper()
	if ev["operationType"] != op {
		t.Fatalf("operationType %v, want %s: %v", ev["operationType"], op, ev)
	}
	for k, want := range fields {
		if !reflect.DeepEqual(ev[k], csToM(want)) {
			t.Fatalf("%s event: %s = %v, want %v (%v)", op, k, ev[k], want, ev)
		}
	}
	if _, ok := ev["_id"].(bson.M)["_data"].(string); !ok {
		t.Fatalf("%s event without a resume token: %v", op, ev)
	}
	if _, ok := ev["clusterTime"].(bson.Timestamp); !ok {
		t.Fatalf("%s event without clusterTime: %v", op, ev)
	}
}

// TestChangeStreamOnAReplicaSet: a collection stream through the Go driver's Watch sees
// inserts, updates (with the looked-up document), replaces, deletes and a transaction's
// operations in order; resumeAfter and startAtOperationTime resume exactly after the token;
// a drop ends the stream with invalidate and startAfter continues past it; database and
// cluster streams see every collection.
func TestChangeStreamOnAReplicaSet(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	defer rc.Close()
	defer ts.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	coll := ts.cl.Database("cs").Collection("c")
	dbStream, err := ts.cl.Database("cs").Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer dbStream.Close(ctx)
	all, err := ts.cl.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close(ctx)
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if cs.ResumeToken() == nil {
		t.Fatal("no postBatchResumeToken in the first batch")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The padding keeps the update's diff smaller than the document: a diff larger than the
	// new document is logged (and streamed) as a replacement, as MongoDB's update driver does.
	pad := strings.Repeat("p", 200)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "pad", Value: pad}})
	must(err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 2}}}, {Key: "$unset", Value: bson.D{{Key: "a", Value: ""}}}})
	must(err)
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "c", Value: 3}})
	must(err)
	_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
	must(err)
	sess, err := ts.cl.StartSession()
	must(err)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 10}}); err != nil {
			return nil, err
		}
		return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 11}})
	})
	sess.EndSession(ctx)
	must(err)

	wantEvent(t, nextEvent(t, cs), "insert", bson.M{"documentKey": bson.M{"_id": int32(1)},
		"fullDocument": bson.M{"_id": int32(1), "a": int32(1), "pad": pad}, "ns": bson.M{"db": "cs", "coll": "c"}})
	upd := nextEvent(t, cs)
	wantEvent(t, upd, "update", bson.M{"documentKey": bson.M{"_id": int32(1)},
		"updateDescription": bson.M{"updatedFields": bson.M{"b": int32(2)}, "removedFields": bson.A{"a"}, "truncatedArrays": bson.A{}}})
	// The looked-up document is the newest majority-committed one: the replacement, or
	// nothing once the delete is in.
	if fd, ok := upd["fullDocument"]; !ok {
		t.Fatalf("update without fullDocument: %v", upd)
	} else if fd != nil && !reflect.DeepEqual(fd, bson.M{"_id": int32(1), "b": int32(2), "pad": pad}) &&
		!reflect.DeepEqual(fd, bson.M{"_id": int32(1), "c": int32(3)}) {
		t.Fatalf("update's fullDocument %v", fd)
	}
	resumeAfterUpdate := cs.ResumeToken()
	wantEvent(t, nextEvent(t, cs), "replace", bson.M{"fullDocument": bson.M{"_id": int32(1), "c": int32(3)}})
	del := nextEvent(t, cs)
	wantEvent(t, del, "delete", bson.M{"documentKey": bson.M{"_id": int32(1)}})
	t1, t2 := nextEvent(t, cs), nextEvent(t, cs)
	wantEvent(t, t1, "insert", bson.M{"documentKey": bson.M{"_id": int32(10)}})
	wantEvent(t, t2, "insert", bson.M{"documentKey": bson.M{"_id": int32(11)}})
	if t1["lsid"] == nil || t1["txnNumber"] == nil || t1["clusterTime"] != t2["clusterTime"] {
		t.Fatalf("transaction events: %v / %v", t1, t2)
	}

	// resumeAfter the update: the replace comes next.
	r, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(resumeAfterUpdate))
	must(err)
	wantEvent(t, nextEvent(t, r), "replace", nil)
	r.Close(ctx)
	// startAtOperationTime the delete's: the delete first.
	dts := del["clusterTime"].(bson.Timestamp)
	r, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&dts))
	must(err)
	wantEvent(t, nextEvent(t, r), "delete", nil)
	r.Close(ctx)

	// The database and cluster streams saw the same events, then another collection's.
	_, err = ts.cl.Database("cs").Collection("other").InsertOne(ctx, bson.D{{Key: "_id", Value: "o"}})
	must(err)
	for _, s := range []*mongo.ChangeStream{dbStream, all} {
		for _, op := range []string{"insert", "update", "replace", "delete", "insert", "insert"} {
			wantEvent(t, nextEvent(t, s), op, bson.M{"ns": bson.M{"db": "cs", "coll": "c"}})
		}
		wantEvent(t, nextEvent(t, s), "insert", bson.M{"ns": bson.M{"db": "cs", "coll": "other"}})
	}

	// drop: drop, then invalidate, then the stream is over; startAfter the invalidate
	// continues with what follows.
	must(coll.Drop(ctx))
	wantEvent(t, nextEvent(t, cs), "drop", nil)
	inv := nextEvent(t, cs)
	wantEvent(t, inv, "invalidate", nil)
	if cs.Next(ctx) || cs.ID() != 0 {
		t.Fatalf("the stream goes on after invalidate (id %d, err %v)", cs.ID(), cs.Err())
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "after"}})
	must(err)
	r, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(cs.ResumeToken()))
	must(err)
	wantEvent(t, nextEvent(t, r), "insert", bson.M{"documentKey": bson.M{"_id": "after"}})
	r.Close(ctx)
	// resumeAfter an invalidate is refused.
	_, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(cs.ResumeToken()))
	csWantCode(t, err, mongoerr.InvalidResumeToken)
}

// csWantCode fails t unless err carries code.
func csWantCode(t *testing.T, err error, code mongoerr.Code) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(code) {
		t.Fatalf("got %v, want code %d", err, code)
	}
}

// TestChangeStreamErrors: MongoDB's codes for streams that cannot open or go on.
func TestChangeStreamErrors(t *testing.T) {
	standalone := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := standalone.cl.Database("d").Collection("c").Watch(ctx, mongo.Pipeline{})
	csWantCode(t, err, mongoerr.Location40573)

	ts, rc := startMember(t, t.TempDir(), 0)
	defer rc.Close()
	defer ts.close(t)
	db := ts.cl.Database("d")
	agg := func(coll any, pipeline ...bson.D) error {
		return db.RunCommand(ctx, bson.D{{Key: "aggregate", Value: coll}, {Key: "pipeline", Value: pipeline},
			{Key: "cursor", Value: bson.D{}}}).Err()
	}
	cs := func(spec bson.D) bson.D {
		if spec == nil {
			spec = bson.D{}
		}
		return bson.D{{Key: "$changeStream", Value: spec}}
	}
	for _, tc := range []struct {
		what string
		err  error
		code mongoerr.Code
	}{
		{"not a document", agg("c", bson.D{{Key: "$changeStream", Value: 1}}), mongoerr.Location50808},
		{"unknown option", agg("c", cs(bson.D{{Key: "nope", Value: 1}})), mongoerr.Location40415},
		{"bad fullDocument", agg("c", cs(bson.D{{Key: "fullDocument", Value: "x"}})), mongoerr.BadValue},
		{"not first", agg("c", bson.D{{Key: "$match", Value: bson.D{}}}, cs(nil)), mongoerr.Location40602},
		{"stage not allowed", agg("c", cs(nil), bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}), mongoerr.IllegalOperation},
		{"unknown stage", agg("c", cs(nil), bson.D{{Key: "$nope", Value: 1}}), mongoerr.Location40324},
		{"cluster stream off admin", agg(1, cs(bson.D{{Key: "allChangesForCluster", Value: true}})), mongoerr.InvalidOptions},
		{"admin without allChangesForCluster", ts.cl.Database("admin").RunCommand(ctx, bson.D{{Key: "aggregate", Value: 1},
			{Key: "pipeline", Value: bson.A{cs(nil)}}, {Key: "cursor", Value: bson.D{}}}).Err(), mongoerr.InvalidNamespace},
		{"local", ts.cl.Database("local").RunCommand(ctx, bson.D{{Key: "aggregate", Value: "c"},
			{Key: "pipeline", Value: bson.A{cs(nil)}}, {Key: "cursor", Value: bson.D{}}}).Err(), mongoerr.InvalidNamespace},
		{"system collection", agg("system.js", cs(nil)), mongoerr.InvalidNamespace},
		{"bad token", agg("c", cs(bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: "zz"}}}})), mongoerr.FailedToParse},
		{"history lost", agg("c", cs(bson.D{{Key: "startAtOperationTime", Value: bson.Timestamp{T: 1, I: 1}}})), mongoerr.ChangeStreamHistoryLost},
	} {
		var ce mongo.CommandError
		if !errors.As(tc.err, &ce) || (tc.code != 0 && ce.Code != int32(tc.code)) {
			t.Errorf("%s: got %v, want code %d", tc.what, tc.err, tc.code)
		}
	}
	// Two resume options, with a real token (a new stream's postBatchResumeToken): 40674, and
	// resumeAfter with startAfter: 50865.
	probe, err := db.Collection("c").Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	tok := probe.ResumeToken()
	probe.Close(ctx)
	csWantCode(t, agg("c", cs(bson.D{{Key: "startAtOperationTime", Value: bson.Timestamp{T: 1, I: 1}},
		{Key: "startAfter", Value: tok}})), mongoerr.Location40674)
	csWantCode(t, agg("c", cs(bson.D{{Key: "resumeAfter", Value: tok}, {Key: "startAfter", Value: tok}})), mongoerr.Location50865)
	// A pipeline that removes _id fails the stream at its first event with 280.
	s, err := db.Collection("c").Watch(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for s.Next(ctx) {
	}
	csWantCode(t, s.Err(), mongoerr.ChangeStreamFatalError)
}

// TestChangeStreamPeriodicNoop: on an idle set the periodic no-op writer moves the
// postBatchResumeToken of an empty getMore forward.
func TestChangeStreamPeriodicNoop(t *testing.T) {
	var rc *coord.Coordinator
	ts := startServerWith(t, t.TempDir(), func(s *server.Server) error {
		var err error
		rc, err = commands.AttachReplication(context.Background(), s.State(), s.Registry(), "rs0",
			fmt.Sprintf("127.0.0.1:%d", s.Port()), 0, coord.Options{TickInterval: 20 * time.Millisecond,
				PeriodicNoopInterval: func() time.Duration { return 200 * time.Millisecond }})
		return err
	})
	defer ts.close(t)
	defer rc.Close()
	if err := rc.Initiate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for !rc.IsWritablePrimary() {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := ts.cl.Database("d").Collection("c").Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	first := cs.ResumeToken().String()
	for i := 0; ; i++ {
		if cs.TryNext(ctx) {
			t.Fatalf("an event on an idle collection")
		}
		if cs.Err() != nil {
			t.Fatal(cs.Err())
		}
		if cs.ResumeToken().String() > first {
			return
		}
		if i > 50 {
			t.Fatalf("postBatchResumeToken stuck at %s", first)
		}
	}
}

// TestChangeStreamPreAndPostImages: on a collection with changeStreamPreAndPostImages, a
// stream with fullDocumentBeforeChange and fullDocument "required" gets the document before
// and after each update, and the document before a delete.
func TestChangeStreamPreAndPostImages(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	defer rc.Close()
	defer ts.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ts.cl.Database("img")
	if err := db.CreateCollection(ctx, "c", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().
		SetFullDocument(options.Required).SetFullDocumentBeforeChange(options.Required))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	pad := strings.Repeat("p", 200)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}, {Key: "pad", Value: pad}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, nextEvent(t, cs), "insert", nil)
	wantEvent(t, nextEvent(t, cs), "update", bson.M{
		"fullDocumentBeforeChange": bson.M{"_id": int32(1), "n": int32(1), "pad": pad},
		"fullDocument":             bson.M{"_id": int32(1), "n": int32(2), "pad": pad}})
	wantEvent(t, nextEvent(t, cs), "delete", bson.M{
		"fullDocumentBeforeChange": bson.M{"_id": int32(1), "n": int32(2), "pad": pad}})
}

// TestChangeStreamSplitLargeEvent: an update event with 2 × 9 MB images is over 16 MB: a
// stream without $changeStreamSplitLargeEvent fails with BSONObjectTooLarge, one with it
// returns two fragments ({splitEvent: {fragment, of}}, the fields spread over them), and a
// stream resumed after the first fragment returns the second.
func TestChangeStreamSplitLargeEvent(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	defer rc.Close()
	defer ts.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := ts.cl.Database("split")
	if err := db.CreateCollection(ctx, "c", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	opts := func() *options.ChangeStreamOptionsBuilder {
		return options.ChangeStream().SetFullDocument(options.Required).SetFullDocumentBeforeChange(options.Required)
	}
	split := mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	whole, err := coll.Watch(ctx, mongo.Pipeline{}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close(ctx)
	cs, err := coll.Watch(ctx, split, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	big := strings.Repeat("x", 9<<20)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: big}}); err != nil {
		t.Fatal(err)
	}
	// The insert's events first: a batch that meets the oversized event fails whole.
	wantEvent(t, nextEvent(t, whole), "insert", nil)
	wantEvent(t, nextEvent(t, cs), "insert", nil)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if whole.Next(ctx) {
		t.Fatalf("a 18 MB event without the split stage: %d bytes", len(whole.Current))
	}
	var ce mongo.CommandError
	if !errors.As(whole.Err(), &ce) || ce.Code != int32(mongoerr.BSONObjectTooLarge) {
		t.Fatalf("without the split stage: %v, want BSONObjectTooLarge", whole.Err())
	}

	var frags []bson.Raw
	for range 2 {
		frags = append(frags, nextRaw(t, cs))
	}
	fields := map[string]bool{}
	for i, f := range frags {
		se := f.Lookup("splitEvent").Document()
		if se.Lookup("fragment").Int32() != int32(i+1) || se.Lookup("of").Int32() != 2 {
			t.Fatalf("fragment %d: splitEvent %v", i, se)
		}
		if len(f) > 16<<20 {
			t.Fatalf("fragment %d is %d bytes", i, len(f))
		}
		els, _ := f.Elements()
		for _, e := range els {
			if k := e.Key(); k != "_id" && k != "splitEvent" {
				if fields[k] {
					t.Fatalf("field %s in two fragments", k)
				}
				fields[k] = true
			}
		}
	}
	for _, k := range []string{"operationType", "fullDocument", "fullDocumentBeforeChange", "updateDescription", "documentKey", "ns"} {
		if !fields[k] {
			t.Errorf("no fragment holds %s (fields %v)", k, fields)
		}
	}
	// Resumed after the first fragment: the second, with the same _id.
	rs, err := coll.Watch(ctx, split, opts().SetResumeAfter(frags[0].Lookup("_id").Document()))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	got := nextRaw(t, rs)
	if !bytes.Equal(got.Lookup("_id").Value, frags[1].Lookup("_id").Value) {
		t.Fatalf("resumed after fragment 1: %v, want fragment 2", got.Lookup("splitEvent"))
	}
	// The stage must come last.
	_, err = coll.Watch(ctx, mongo.Pipeline{split[0], {{Key: "$match", Value: bson.D{}}}})
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location7182802) {
		t.Fatalf("split stage not last: %v", err)
	}
}

// nextRaw is nextEvent's raw event.
func nextRaw(t *testing.T, cs *mongo.ChangeStream) bson.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !cs.Next(ctx) {
		t.Fatalf("no event: %v", cs.Err())
	}
	return append(bson.Raw(nil), cs.Current...)
}

// TestChangeStreamViewEvents: with showExpandedEvents a database stream reports a view's
// create, collMod (modify, with the new definition) and drop; collMod checks its options.
func TestChangeStreamViewEvents(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	defer rc.Close()
	defer ts.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := ts.cl.Database("views")
	cs, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	run := func(cmd bson.D) error { return db.RunCommand(ctx, cmd).Err() }
	if err := run(bson.D{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "c"}, {Key: "pipeline", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	newPipe := bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: 1}}}}}
	if err := run(bson.D{{Key: "collMod", Value: "v"}, {Key: "pipeline", Value: newPipe}}); err != nil {
		t.Fatal(err)
	}
	var ce mongo.CommandError
	if err := run(bson.D{{Key: "collMod", Value: "v"}, {Key: "validator", Value: bson.D{}}}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.InvalidOptions) {
		t.Fatalf("collMod validator on a view: %v", err)
	}
	if err := run(bson.D{{Key: "collMod", Value: "v"}, {Key: "viewOn", Value: "v"}}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.GraphContainsCycle) {
		t.Fatalf("collMod making a cycle: %v", err)
	}
	if err := run(bson.D{{Key: "create", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := run(bson.D{{Key: "collMod", Value: "c"}, {Key: "viewOn", Value: "x"}}); !errors.As(err, &ce) || ce.Code != int32(mongoerr.InvalidOptions) {
		t.Fatalf("collMod viewOn on a collection: %v", err)
	}
	if err := db.Collection("v").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 4 {
		ev := nextRaw(t, cs)
		op, _ := ev.Lookup("operationType").StringValueOK()
		coll, _ := ev.Lookup("ns", "coll").StringValueOK()
		got = append(got, op+":"+coll)
		if op == "modify" && coll == "v" {
			if desc := ev.Lookup("operationDescription").Document().String(); desc != `{"viewOn": "c","pipeline": [{"$match": {"x": {"$numberInt":"1"}}}]}` {
				t.Fatalf("modify's operationDescription %s", desc)
			}
		}
	}
	if g := strings.Join(got, " "); g != "create:v modify:v create:c drop:v" {
		t.Fatalf("events %s", g)
	}
	cur, err := db.ListCollections(ctx, bson.D{{Key: "name", Value: "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Next(ctx) {
		t.Fatalf("the dropped view is listed: %v", cur.Current)
	}
}
