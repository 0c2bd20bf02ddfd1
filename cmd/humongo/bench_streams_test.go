package main

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/bench"
)

// TestStreamWatchMatchesEvents: an event is matched to its write's acknowledgement by
// documentKey._id whichever comes first; an event that came first counts as no delay, an
// acknowledged write without its event stays counted as never delivered.
func TestStreamWatchMatchesEvents(t *testing.T) {
	w := &streamWatch{acked: map[string]time.Time{}, arrived: map[string]time.Time{}, hist: bench.NewHistogram()}
	ev := func(key string) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: key}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w.ack("a")
	w.delivered(ev("a")) // after its acknowledgement
	w.delivered(ev("b")) // before it
	w.ack("b")
	w.ack("c") // never delivered
	w.delivered(bson.Raw(nil))
	if n := w.hist.Count(); n != 2 {
		t.Fatalf("%d latencies recorded, want 2", n)
	}
	if w.hist.Min() != 0 {
		t.Fatalf("the event that came first recorded %d, want 0", w.hist.Min())
	}
	if len(w.acked) != 1 || len(w.arrived) != 0 {
		t.Fatalf("pending: %d acknowledged, %d arrived; want 1 and 0", len(w.acked), len(w.arrived))
	}
}
