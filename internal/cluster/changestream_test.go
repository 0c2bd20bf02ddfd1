package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// csOp is one change a writer made, named as its event will be: "insert:<id>",
// "update:<id>:<u>", "delete:<id>".
type csOp string

// csWriter runs a sequential workload of inserts, updates, deletes and two-insert
// transactions (w: majority, retryable writes) and records which changes were acknowledged
// (in commit order: one writer, each change waits for the previous one) and which may or may
// not have happened (an error after the attempt).
type csWriter struct {
	mu        sync.Mutex
	acked     []csOp
	uncertain map[csOp]bool
}

func (w *csWriter) note(err error, ops ...csOp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, op := range ops {
		if err == nil {
			w.acked = append(w.acked, op)
		} else {
			w.uncertain[op] = true
		}
	}
}

func (w *csWriter) run(ctx context.Context, cl *mongo.Client, coll *mongo.Collection) {
	for i := 0; ctx.Err() == nil; i++ {
		id := "k" + strconv.Itoa(i)
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: i}})
		w.note(err, csOp("insert:"+id))
		if err != nil {
			continue // the next steps need this document
		}
		if i%3 == 0 && i > 0 {
			prev := "k" + strconv.Itoa(i-1)
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: prev}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: i}}}})
			w.note(err, csOp(fmt.Sprintf("update:%s:%d", prev, i)))
		}
		if i%5 == 0 && i > 1 {
			old := "k" + strconv.Itoa(i-2)
			_, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: old}})
			w.note(err, csOp("delete:"+old))
		}
		if i%7 == 0 {
			a, b := "t"+strconv.Itoa(i)+"a", "t"+strconv.Itoa(i)+"b"
			sess, err := cl.StartSession()
			if err == nil {
				_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
					if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: a}}); err != nil {
						return nil, err
					}
					return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: b}})
				})
				sess.EndSession(context.Background())
			}
			w.note(err, csOp("insert:"+a), csOp("insert:"+b))
		}
	}
}

// csMap turns the driver's nested bson.D into bson.M.
func csMap(v any) any {
	switch x := v.(type) {
	case bson.D:
		m := bson.M{}
		for _, e := range x {
			m[e.Key] = csMap(e.Value)
		}
		return m
	case bson.M:
		for k, e := range x {
			x[k] = csMap(e)
		}
		return x
	}
	return v
}

// csEventOp names an event as csWriter names its changes.
func csEventOp(ev bson.M) csOp {
	id := fmt.Sprint(ev["documentKey"].(bson.M)["_id"])
	switch op := ev["operationType"].(string); op {
	case "update":
		return csOp(fmt.Sprintf("update:%s:%v", id, ev["updateDescription"].(bson.M)["updatedFields"].(bson.M)["u"]))
	default:
		return csOp(op + ":" + id)
	}
}

// TestChangeStreamAcrossFailovers (issue 15): a stream with fullDocument: updateLookup over a
// workload of inserts, updates, deletes and transactions while the primary is killed twice.
// The driver resumes the stream on each new primary and the consumer sees exactly the
// acknowledged changes in their commit order, each once, plus at most once each change whose
// acknowledgement was lost: never a rolled-back write, never a duplicate. HUMONGO_CS_CYCLES
// sets the number of kills (default 2).
func TestChangeStreamAcrossFailovers(t *testing.T) {
	cycles := 2
	if s := os.Getenv("HUMONGO_CS_CYCLES"); s != "" {
		cycles, _ = strconv.Atoi(s)
	}
	d := startSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(60+40*cycles)*time.Second)
	defer cancel()
	coll := d.Client.Database("cs").Collection("events", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "start"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.UpdateLookup).
		SetMaxAwaitTime(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())

	var events []bson.M
	consumed := make(chan error, 1)
	go func() {
		for cs.Next(ctx) {
			var ev bson.M
			if err := cs.Decode(&ev); err != nil {
				consumed <- err
				return
			}
			ev = csMap(ev).(bson.M)
			events = append(events, ev)
			if ev["operationType"] == "insert" && ev["documentKey"].(bson.M)["_id"] == "end" {
				consumed <- nil
				return
			}
		}
		consumed <- fmt.Errorf("stream ended: %w", cs.Err())
	}()

	w := &csWriter{uncertain: map[csOp]bool{}}
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx, d.Client, coll) }()
	acks := func() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.acked) }
	waitAcks := func(n int) {
		for deadline := time.Now().Add(30 * time.Second); acks() < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d changes acknowledged, want %d", acks(), n)
			}
		}
	}
	waitAcks(30)
	for c := 0; c < cycles; c++ {
		primary, err := d.Primary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := primary.Kill(); err != nil {
			t.Fatal(err)
		}
		ectx, ecancel := context.WithTimeout(ctx, failoverLiveness)
		np, err := d.WaitForPrimary(ectx, primary)
		ecancel()
		if err != nil {
			t.Fatalf("no new primary after killing %s: %v", primary.Name(), err)
		}
		t.Logf("cycle %d: killed %s, %s is primary", c, primary.Name(), np.Name())
		before := acks()
		if err := primary.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		waitAcks(before + 30)
	}
	stopWriter()
	wg.Wait()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "end"}}); err != nil {
		t.Fatal(err)
	}
	if err := <-consumed; err != nil {
		t.Fatalf("consumer: %v after %d events", err, len(events))
	}

	// Check: the acknowledged changes in order, each event at most once, the others only
	// changes whose outcome is unknown.
	seen := map[csOp]bool{}
	next := 0
	for _, ev := range events[:len(events)-1] {
		op := csEventOp(ev)
		if op == "insert:start" {
			continue
		}
		if seen[op] {
			t.Fatalf("event %s delivered twice", op)
		}
		seen[op] = true
		switch {
		case next < len(w.acked) && w.acked[next] == op:
			next++
		case w.uncertain[op]:
		default:
			want := csOp("(none)")
			if next < len(w.acked) {
				want = w.acked[next]
			}
			t.Fatalf("event %s out of order or never acknowledged: want %s next (%d of %d acknowledged seen)", op, want, next, len(w.acked))
		}
		if ev["operationType"] == "update" {
			if _, ok := ev["fullDocument"]; !ok {
				t.Fatalf("update without fullDocument: %v", ev)
			}
		}
	}
	if next != len(w.acked) {
		t.Fatalf("acknowledged change %s never delivered (%d of %d seen)", w.acked[next], next, len(w.acked))
	}
	t.Logf("%d events; %d acknowledged changes all delivered once, in order; %d uncertain", len(events), len(w.acked), len(w.uncertain))
	var ce mongo.CommandError
	if errors.As(cs.Err(), &ce) {
		t.Fatalf("stream error: %v", ce)
	}
}
