package index

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// TTL defaults (server parameters; not in the spec document).
const (
	DefaultTTLMonitorSleepSecs      = 60
	DefaultTTLIndexDeleteTargetDocs = 50000
	DefaultTTLIndexDeleteTargetTime = time.Second
	DefaultTTLMonitorSubPassTarget  = 60 * time.Second
	ttlDeleteBatch                  = 64 // documents per write unit
)

// TTLOptions configure a TTLMonitor.
type TTLOptions struct {
	// Now is the clock used to decide expiry (default time.Now).
	Now func() time.Time
	// IsPrimary reports whether this node may delete (secondaries get TTL deletes through
	// replication). nil means always (standalone).
	IsPrimary func() bool
	// Delete removes one expired document; nil means Collection.DeleteDocument inside
	// Collection.Write. The server routes it through the op observer so deletes replicate.
	Delete func(ctx context.Context, coll *Collection, ru *storage.RecoveryUnit, rid recordid.ID, doc bsoncore.Document) error
	// Logf receives one line per pass with deletions (optional).
	Logf func(format string, args ...any)
}

// TTLMonitor is the background job that deletes expired documents of TTL indexes (spec: "The
// TTLMonitor", "Fair TTL Deletion"). Every ttlMonitorSleepSecs it runs a pass made of
// subpasses; a subpass visits every TTL index round-robin, deleting up to
// ttlIndexDeleteTargetDocs documents or for up to ttlIndexDeleteTargetTimeMS per visit, and a
// new subpass starts while some index still had expired documents (bounded by
// ttlMonitorSubPassTargetSecs). A document expires when the indexed date, or the earliest date
// of an array of dates, plus expireAfterSeconds is before now; non-date values never expire.
//
// The monitor owns one goroutine between Start and Stop.
type TTLMonitor struct {
	cs   *Collections
	opts TTLOptions

	period     atomic.Int64 // time.Duration between passes
	targetDocs atomic.Int64
	wake       chan struct{} // period changed

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	passes  atomic.Int64
	deleted atomic.Int64
}

// NewTTLMonitor returns a stopped monitor over the collections of cs.
func NewTTLMonitor(cs *Collections, opts TTLOptions) *TTLMonitor {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &TTLMonitor{cs: cs, opts: opts, wake: make(chan struct{}, 1)}
	m.period.Store(int64(DefaultTTLMonitorSleepSecs * time.Second))
	m.targetDocs.Store(DefaultTTLIndexDeleteTargetDocs)
	return m
}

// SetSleepSecs sets ttlMonitorSleepSecs; a running monitor applies it to the current wait.
func (m *TTLMonitor) SetSleepSecs(secs int) error {
	if secs < 1 {
		return mongoerr.Newf(mongoerr.BadValue, "ttlMonitorSleepSecs must be at least 1, got %d", secs)
	}
	m.SetPeriod(time.Duration(secs) * time.Second)
	return nil
}

// SetPeriod sets the time between passes with sub-second precision (tests).
func (m *TTLMonitor) SetPeriod(d time.Duration) {
	m.period.Store(int64(d))
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// SetIndexDeleteTargetDocs sets ttlIndexDeleteTargetDocs.
func (m *TTLMonitor) SetIndexDeleteTargetDocs(n int64) {
	if n > 0 {
		m.targetDocs.Store(n)
	}
}

// Passes and Deleted are counters for serverStatus (metrics.ttl.passes / deletedDocuments).
func (m *TTLMonitor) Passes() int64  { return m.passes.Load() }
func (m *TTLMonitor) Deleted() int64 { return m.deleted.Load() }

// Start runs the monitor until ctx is done or Stop is called. Until Stop it is its
// collections' running monitor (Collections.TTLMonitor).
func (m *TTLMonitor) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		return
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	m.cs.ttl.Store(m)
	go m.run(ctx, m.done)
}

// Stop stops the monitor and waits for its goroutine to exit.
func (m *TTLMonitor) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.cancel, m.done = nil, nil
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
		m.cs.ttl.CompareAndSwap(m, nil)
	}
}

// TTLMonitor returns the monitor running over cs (started and not stopped), nil when none
// runs: serverStatus metrics.ttl and tests read its counters. Each node has its own.
func (cs *Collections) TTLMonitor() *TTLMonitor { return cs.ttl.Load() }

func (m *TTLMonitor) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	last := time.Now()
	for {
		wait := time.Duration(m.period.Load()) - time.Since(last)
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-m.wake:
				t.Stop()
				continue // recompute the wait with the new period
			case <-t.C:
			}
		}
		last = time.Now()
		if m.opts.IsPrimary != nil && !m.opts.IsPrimary() {
			continue
		}
		n, err := m.RunPass(ctx)
		if ctx.Err() != nil {
			return
		}
		if m.opts.Logf != nil && (n > 0 || err != nil) {
			m.opts.Logf("TTL pass deleted %d documents (err: %v)", n, err)
		}
	}
}

// ttlTarget is one TTL index visited by a pass.
type ttlTarget struct {
	coll   *Collection
	ix     *Index
	expire int64 // seconds
	done   bool
}

// RunPass runs one TTL pass now and returns the number of documents deleted.
func (m *TTLMonitor) RunPass(ctx context.Context) (int64, error) {
	m.passes.Add(1)
	start := time.Now()
	var total int64
	var firstErr error
	for {
		targets := m.targets()
		more := false
		for _, t := range targets {
			n, hitLimit, err := m.deleteExpired(ctx, t)
			total += n
			if err != nil {
				if ctx.Err() != nil {
					return total, ctx.Err()
				}
				if firstErr == nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
					firstErr = err
				}
				continue
			}
			more = more || hitLimit
		}
		if !more || time.Since(start) > DefaultTTLMonitorSubPassTarget {
			break
		}
	}
	m.deleted.Add(total)
	return total, firstErr
}

// targets lists the TTL indexes of the latest catalog: ready, single-field, expireAfterSeconds.
func (m *TTLMonitor) targets() []*ttlTarget {
	var out []*ttlTarget
	for _, meta := range m.cs.cat.Latest().All() {
		var has bool
		for i := range meta.Indexes {
			if meta.Indexes[i].ExpireAfterSeconds != nil && meta.Indexes[i].Ready {
				has = true
			}
		}
		if !has || meta.Capped {
			continue
		}
		coll, err := m.cs.ByUUID(meta.UUID)
		if err != nil {
			continue
		}
		ixs, err := coll.Indexes()
		if err != nil {
			continue
		}
		for _, ix := range ixs {
			exp := ix.meta.ExpireAfterSeconds
			if exp == nil || ix.gen.NumFields() != 1 || ix.gen.IsHashed() {
				continue
			}
			out = append(out, &ttlTarget{coll: coll, ix: ix, expire: *exp})
		}
	}
	return out
}

func dateValue(ms int64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, ms)}
}

// deleteExpired deletes up to ttlIndexDeleteTargetDocs expired documents of one TTL index,
// within ttlIndexDeleteTargetTimeMS. hitLimit reports that more may remain.
func (m *TTLMonitor) deleteExpired(ctx context.Context, t *ttlTarget) (n int64, hitLimit bool, err error) {
	now := m.opts.Now()
	cutoff := now.UnixMilli() - t.expire*1000
	if t.expire > math.MaxInt64/1000 || cutoff > now.UnixMilli() {
		return 0, false, nil // absurd expireAfterSeconds: nothing can expire
	}
	// Dates before cutoff, in key order (a descending index reverses it).
	minDate := &Bound{Values: []bsoncore.Value{dateValue(math.MinInt64)}, Inclusive: true}
	cut := &Bound{Values: []bsoncore.Value{dateValue(cutoff)}, Inclusive: false}
	so := ScanOptions{Low: minDate, High: cut}
	if t.ix.ord&1 != 0 {
		so = ScanOptions{Low: cut, High: minDate}
	}
	limit := m.targetDocs.Load()
	deadline := time.Now().Add(DefaultTTLIndexDeleteTargetTime)

	ru := t.coll.e.NewRecoveryUnit()
	defer ru.Close()
	// The candidates are re-checked under the delete's unit, which waits for a prepared
	// transaction that wrote one: the scan itself need not wait for any.
	if err := ru.SetPrepareConflictBehavior(storage.PrepareConflictIgnore); err != nil {
		return 0, false, err
	}
	c, err := t.ix.NewCursor(ru, so)
	if err != nil {
		return 0, false, err
	}
	seen := map[recordid.ID]struct{}{}
	var rids []recordid.ID
	for c.Next() {
		rid := c.RecordID()
		if _, dup := seen[rid]; dup {
			continue // a multikey document with several expired dates
		}
		seen[rid] = struct{}{}
		rids = append(rids, rid)
		if int64(len(rids)) >= limit {
			hitLimit = true
			break
		}
	}
	err = c.Err()
	c.Close()
	ru.AbandonSnapshot()
	if err != nil {
		return 0, false, err
	}
	if err := ru.SetPrepareConflictBehavior(storage.PrepareConflictEnforce); err != nil {
		return 0, false, err
	}
	for start := 0; start < len(rids); start += ttlDeleteBatch {
		if err := ctx.Err(); err != nil {
			return n, false, err
		}
		if time.Now().After(deadline) {
			return n, true, nil
		}
		batch := rids[start:min(len(rids), start+ttlDeleteBatch)]
		var deleted int64
		err := t.coll.Write(ctx, ru, func() error {
			deleted = 0
			for _, rid := range batch {
				doc, found, err := t.coll.rs.Get(ru, rid)
				if err != nil {
					return err
				}
				// Re-check: the document may have changed since the index scan.
				if !found || !m.expired(t, doc, cutoff) {
					continue
				}
				if m.opts.Delete != nil {
					err = m.opts.Delete(ctx, t.coll, ru, rid, doc)
				} else {
					err = t.coll.DeleteDocument(ru, rid, doc)
				}
				if err != nil {
					return err
				}
				deleted++
			}
			return nil
		})
		if err != nil {
			return n, false, err
		}
		n += deleted
	}
	return n, hitLimit, nil
}

// expired reports whether doc's indexed date (or earliest date of an array) is before cutoff.
func (m *TTLMonitor) expired(t *ttlTarget, doc bsoncore.Document, cutoff int64) bool {
	var ks KeySet
	if err := t.ix.gen.GetKeys(doc, &ks); err != nil {
		return false
	}
	for i := 0; i < ks.Len(); i++ {
		v := ks.Key(i)[0]
		if v.Type == bsoncore.TypeDateTime {
			if ms, ok := v.DateTimeOK(); ok && ms < cutoff {
				return true
			}
		}
	}
	return false
}
