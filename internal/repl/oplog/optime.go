package oplog

import (
	"sync"
	"time"

	"humongo/internal/optime"
	"humongo/internal/storage"
)

// TermSource returns the term of the entries this node logs of its own and whether it may
// log replicated writes; the ReplicationCoordinator supplies it. Both come from one snapshot
// of the coordinator: a writable primary gets the term it was elected in, never a newer term
// it has only heard of. A primary that learns of a higher term steps down, but a write that
// passed the writability check before that would otherwise stamp its entry with the new term
// while this node is not that term's primary, and a node whose last entry is of term T takes
// term T's commit point from heartbeats as covering its own log: it could then make an entry
// no majority holds its stable timestamp, and later refuse to roll it back.
type TermSource func() (term int64, writable bool)

// LocalOplogInfo hands out oplog slots (MongoDB's LocalOplogInfo::getNextOpTimes). The next
// timestamp is max(wall-clock seconds:1, last+1, all-durable+1, ClusterTime+1): monotonic
// across calls, never below a timestamp the engine may already have made visible, and after
// every cluster time the node has heard of.
//
// A slot is reserved and registered with the storage engine (RecoveryUnit.SetTimestamp marks
// it in flight) under the same mutex. Otherwise a writer could take T5, be descheduled, and a
// second writer take T6 and commit while T5 is not yet in flight: the all-durable point would
// pass T6 and an oplog reader would skip T5 for good (spec: "Oplog Visibility").
type LocalOplogInfo struct {
	e   *storage.Engine
	now func() time.Time
	// clusterTime is the vector clock's ClusterTime (nil: none).
	clusterTime func() optime.Timestamp

	mu   sync.Mutex
	last optime.Timestamp // largest timestamp handed out or observed; guarded by mu
}

// NewLocalOplogInfo returns a slot allocator starting after last.
func NewLocalOplogInfo(e *storage.Engine, last optime.Timestamp, now func() time.Time) *LocalOplogInfo {
	if now == nil {
		now = time.Now
	}
	return &LocalOplogInfo{e: e, now: now, last: last}
}

// ReserveSlots reserves n consecutive OpTimes of term for ru, appending them to dst, and
// registers each in flight. On return ru's current timestamp is the last slot; a caller writing several
// entries calls ru.SetTimestamp(slot) before each one's writes.
func (l *LocalOplogInfo) ReserveSlots(ru *storage.RecoveryUnit, term int64, n int, dst []optime.OpTime) ([]optime.OpTime, error) {
	secs := l.now().Unix()
	secs = max(0, min(secs, 1<<32-1))
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := max(optime.MakeTimestamp(uint32(secs), 1), l.last+1, l.e.AllDurableTimestamp()+1)
	if l.clusterTime != nil {
		ts = max(ts, l.clusterTime()+1)
	}
	for i := range n {
		t := ts + optime.Timestamp(i)
		if err := ru.SetTimestamp(t); err != nil {
			// Slots already registered are released when the unit rolls back.
			return dst, err
		}
		dst = append(dst, optime.OpTime{TS: t, Term: term})
		l.last = t
	}
	return dst, nil
}

// Observe raises the allocator past ts (entries written by a secondary's applier, or found
// in the oplog at startup), so slots handed out after a step-up follow them.
func (l *LocalOplogInfo) Observe(ts optime.Timestamp) {
	l.mu.Lock()
	if ts > l.last {
		l.last = ts
	}
	l.mu.Unlock()
}

// Last returns the largest timestamp handed out or observed.
func (l *LocalOplogInfo) Last() optime.Timestamp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
