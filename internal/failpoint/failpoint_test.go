package failpoint

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func TestModes(t *testing.T) {
	fp := Register("testModes")
	if Register("testModes") != fp || Get("testModes") != fp || Get("nope") != nil {
		t.Fatal("registry identity")
	}
	if _, ok := fp.Evaluate(nil); ok {
		t.Fatal("off fired")
	}
	data := bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build()
	fp.Configure(Times, 2, 0, data)
	// A rejecting predicate neither fires nor counts.
	if _, ok := fp.Evaluate(func(bsoncore.Document) bool { return false }); ok {
		t.Fatal("rejected evaluation fired")
	}
	for i := range 2 {
		d, ok := fp.Evaluate(nil)
		if !ok || d.Lookup("x").Int32() != 1 {
			t.Fatalf("fire %d: %v %v", i, d, ok)
		}
	}
	if _, ok := fp.Evaluate(nil); ok || fp.Enabled() {
		t.Fatal("times exhausted but still firing")
	}
	if n := fp.Configure(Skip, 1, 0, nil); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	if _, ok := fp.Evaluate(nil); ok {
		t.Fatal("skip: first evaluation fired")
	}
	if _, ok := fp.Evaluate(nil); !ok {
		t.Fatal("skip: second evaluation did not fire")
	}
	fp.Configure(Probability, 0, 0, nil)
	for range 100 {
		if _, ok := fp.Evaluate(nil); ok {
			t.Fatal("probability 0 fired")
		}
	}
	fp.Disable()
}

func TestWaitForTimesEntered(t *testing.T) {
	fp := Register("testWait")
	fp.Configure(AlwaysOn, 0, 0, nil)
	defer fp.Disable()
	done := make(chan error, 1)
	target := fp.TimesEntered() + 2
	go func() { done <- fp.WaitForTimesEntered(context.Background(), target) }()
	fp.Evaluate(nil)
	fp.Evaluate(nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := fp.WaitForTimesEntered(ctx, 1<<40); err == nil {
		t.Fatal("wait did not time out")
	}
}
