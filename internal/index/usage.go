package index

import (
	"sync/atomic"
	"time"
)

// Usage counts the executions of query plans that read an index, for $indexStats'
// accesses {ops, since}. As in MongoDB it lives in memory only: it restarts at zero when the
// process starts and when the index is dropped and recreated or rebuilt (a new ident gets a
// new Index and so a new Usage); since is when this counter started.
type Usage struct {
	ops   atomic.Int64
	since time.Time
}

func newUsage() *Usage { return &Usage{since: time.Now()} }

// RecordAccess counts one execution of a plan that reads the index.
func (ix *Index) RecordAccess() {
	if ix != nil && ix.usage != nil {
		ix.usage.ops.Add(1)
	}
}

// Accesses returns the number of plan executions that read the index and since when they
// are counted.
func (ix *Index) Accesses() (ops int64, since time.Time) {
	if ix == nil || ix.usage == nil {
		return 0, time.Time{}
	}
	return ix.usage.ops.Load(), ix.usage.since
}
