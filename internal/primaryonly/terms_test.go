package primaryonly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// FollowTerms: one StepUp per primary term (a failed one retried), a StepDown when the node
// steps down or a new term begins, and one at the end for a running term.
func TestFollowTerms(t *testing.T) {
	node := newFakeNode()
	var mu sync.Mutex
	var events []string
	events1 := make(chan string, 100)
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		events1 <- e
	}
	failOnce := true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		FollowTerms(ctx, node, 10*time.Millisecond, slog.New(slog.DiscardHandler), "test", TermHooks{
			StepUp: func(_ context.Context, term int64) error {
				if term == 2 && failOnce {
					failOnce = false
					record("fail 2")
					return errors.New("cannot read the state documents")
				}
				record(fmt.Sprintf("up %d", term))
				return nil
			},
			StepDown: func() { record("down") },
		})
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-events1:
			if got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event, want %q", want)
		}
	}
	node.set(true, 1)
	next("up 1")
	node.set(false, 1)
	next("down")
	node.set(true, 2)
	next("fail 2")
	next("up 2")      // retried after the delay
	node.set(true, 3) // a new term without a step-down
	next("down")
	next("up 3")
	cancel()
	<-done
	next("down")
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 7 {
		t.Fatalf("events %v", events)
	}
}
