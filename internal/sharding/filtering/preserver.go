package filtering

// In-flight query tracking (spec: sharding.md "Orphaned range deletion" and "Orphan
// filtering"; MongoDB 7.0's MetadataManager with its CollectionMetadataTracker usage counts,
// RangePreserver and getOngoingQueriesCompletionFuture).
//
// A versioned read of a sharded collection gets the ownership filter of the metadata its
// shard version was checked against, and keeps it for its whole life: its plan holds the
// filter, and a cursor holds its plan until it is exhausted, killed or times out. After a
// migration commits, the donor installs newer metadata that no longer owns the moved range,
// but such a read must still see the moved documents. So each filter Check hands out is a
// use of its metadata: the operation holds it until it ends (operation.Context.Close releases
// it), each plan built over it holds one more until the plan is closed (operation.Read.Plan
// pins it, plan.Executor.Close unpins), and the range deleter waits until no metadata other
// than the current one that owns a chunk overlapping its range has a use left
// (WaitForRangeQueries) before it deletes anything.

import (
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/optime"
	"humongo/internal/query/plan"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// usersOf counts the in-flight uses of each metadata that has any (guarded by Runtime.mu);
// changed is closed and replaced whenever a count drops to zero.
type usersOf struct {
	n       map[*CollectionMetadata]int
	ns      map[*CollectionMetadata]string
	changed chan struct{}
}

// checkAndPin checks received against ns's metadata and returns its ownership filter holding
// one use of that metadata for the caller (nil for an unsharded collection). A read at a
// cluster time (at != 0: a snapshot read or a snapshot transaction's statement) is checked
// against the current version, as MongoDB 5.0 to 7.0 check it, and filtered by the ownership
// of that time from the chunks' history: the donor of a later migration still owns the
// moved range then, its recipient (which holds the cloned documents from before the commit)
// does not. The range deleter need not wait for such a read: its deletes come after the
// read's snapshot, which still holds the documents. The check and the
// pin see the same installed metadata: a refresh installing newer metadata in between makes it
// check again, so the range deleter never misses a use it should wait for.
func (r *Runtime) checkAndPin(ns, shard string, received routing.ChunkVersion, at optime.Timestamp) (plan.OwnershipFilter, error) {
	for {
		m, err := r.CheckCollection(ns, shard, received)
		if err != nil || m == nil {
			return nil, err
		}
		if !m.Sharded() {
			return nil, nil
		}
		r.mu.Lock()
		if r.colls[ns] != m {
			r.mu.Unlock()
			continue
		}
		table := m.Table
		if at != 0 {
			table = table.At(bson.Timestamp{T: at.Secs(), I: at.Inc()})
		}
		f := &pinnedFilter{ownership: ownership{table, m.Shard}, rt: r, m: m}
		f.release = r.pinLocked(ns, m)
		r.mu.Unlock()
		return f, nil
	}
}

// pinLocked adds a use of m (r.mu held) and returns its idempotent release.
func (r *Runtime) pinLocked(ns string, m *CollectionMetadata) func() {
	u := &r.users
	if u.n == nil {
		u.n, u.ns = map[*CollectionMetadata]int{}, map[*CollectionMetadata]string{}
	}
	u.n[m]++
	u.ns[m] = ns
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if u.n[m]--; u.n[m] > 0 {
				return
			}
			delete(u.n, m)
			delete(u.ns, m)
			if u.changed != nil {
				close(u.changed)
				u.changed = nil
			}
		})
	}
}

// pinnedFilter is an ownership filter holding one use of its metadata: the operation's, given
// back by Release; Pin adds one for each plan built over it.
type pinnedFilter struct {
	ownership
	rt      *Runtime
	m       *CollectionMetadata
	release func()
}

// Release gives back the use Check took (operation.Context.Close calls it).
func (f *pinnedFilter) Release() { f.release() }

// Pin adds a use of the filter's metadata for a plan; unpin gives it back.
func (f *pinnedFilter) Pin() (unpin func()) {
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	return f.rt.pinLocked(f.rt.usersNS(f.m), f.m)
}

// usersNS is the namespace m's uses were taken for (r.mu held).
func (r *Runtime) usersNS(m *CollectionMetadata) string { return r.users.ns[m] }

// InFlightUses is the number of uses of ns's metadata in flight (current and older), for
// tests and diagnostics.
func (r *Runtime) InFlightUses(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for m, c := range r.users.n {
		if r.users.ns[m] == ns {
			n += c
		}
	}
	return n
}

// WaitForRangeQueries waits until no read that may still see the documents of [min, max) of
// collection uuid in ns as owned is in flight: no use remains of a metadata other than the
// current one (the one that stopped owning the range) that has this shard owning a chunk
// overlapping the range (MongoDB's getOngoingQueriesCompletionFuture). It returns ctx's error
// if ctx ends first.
func (r *Runtime) WaitForRangeQueries(ctx context.Context, ns string, uuid catalog.UUID, min, max bsoncore.Document) error {
	for {
		r.mu.Lock()
		cur := r.colls[ns]
		blocked := false
		for m := range r.users.n {
			if m != cur && r.users.ns[m] == ns && m.ownsOverlapping(uuid, min, max) {
				blocked = true
				break
			}
		}
		if !blocked {
			r.mu.Unlock()
			return nil
		}
		if r.users.changed == nil {
			r.users.changed = make(chan struct{})
		}
		ch := r.users.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// OwnsOverlapping reports whether this metadata is of collection uuid and has its shard owning
// a chunk that overlaps [min, max).
func (m *CollectionMetadata) OwnsOverlapping(uuid catalog.UUID, min, max bsoncore.Document) bool {
	return m.ownsOverlapping(uuid, min, max)
}

func (m *CollectionMetadata) ownsOverlapping(uuid catalog.UUID, min, max bsoncore.Document) bool {
	if m == nil || m.Table == nil || m.Table.UUID() != uuid {
		return false
	}
	for _, c := range m.Table.Chunks() {
		if c.Shard == m.Shard && shardkey.HalfOpenOverlap(c.Min, c.Max, min, max) {
			return true
		}
	}
	return false
}
