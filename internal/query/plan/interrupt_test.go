package plan

import (
	"context"
	"errors"
	"testing"
)

// TestPlanInterrupted: an interrupted operation's plan stops with the context's cause, at
// preparation and while it runs.
func TestPlanInterrupted(t *testing.T) {
	f := newPlanFixture(t, 3000)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	cause := errors.New("killed")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if _, err := Prepare(ctx, ru, f.meta, f.coll, Request{NS: "test.c", Filter: bigInFilter("b", 1000)}); !errors.Is(err, cause) {
		t.Fatalf("Prepare under a cancelled context: %v", err)
	}
	ex, err := Prepare(context.Background(), ru, f.meta, f.coll, Request{NS: "test.c", Filter: bigInFilter("b", 1000)})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	if _, _, _, err := ex.Next(ctx); !errors.Is(err, cause) {
		t.Fatalf("Next under a cancelled context: %v", err)
	}
}
