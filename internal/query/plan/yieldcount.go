package plan

import (
	"context"
	"sync/atomic"
)

type yieldCounterKey struct{}

// WithYieldCounter returns ctx carrying c: executors running under it add one to c at each
// yield, so that currentOp can report an operation's numYields while it runs.
func WithYieldCounter(ctx context.Context, c *atomic.Int64) context.Context {
	return context.WithValue(ctx, yieldCounterKey{}, c)
}

func countYield(ctx context.Context) {
	if c, _ := ctx.Value(yieldCounterKey{}).(*atomic.Int64); c != nil {
		c.Add(1)
	}
}
