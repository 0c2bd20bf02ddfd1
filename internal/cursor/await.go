package cursor

import (
	"sync"
	"sync/atomic"
)

// awaitData getMores on a capped collection wait for the next insert into it (MongoDB's
// CappedInsertNotifier); the oplog has its own signal (the oplog writer's visibility
// channel), chosen by the command layer. The notifier and its counters belong to the
// manager, so each server has its own.

// insertNotifier wakes awaitData getMores when documents are inserted into a capped
// collection.
type insertNotifier struct {
	mu sync.Mutex
	ch map[string]chan struct{} // guarded by mu; nil until the first wait
}

// AwaitDataStats counts how awaitData getMores that found nothing ended their waits.
type AwaitDataStats struct {
	// Notified: woken by an insert (capped collections) or new visible oplog entries.
	Notified atomic.Int64
	// Expired: the await time (maxTimeMS, or 1 s) ran out first.
	Expired atomic.Int64
}

// WaitInsert returns a channel closed at the next NotifyInsert of ns. Take it before
// reading, so an insert between the read and the wait is not missed.
func (m *Manager) WaitInsert(ns string) <-chan struct{} {
	n := &m.inserts
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.ch[ns]
	if !ok {
		if n.ch == nil {
			n.ch = map[string]chan struct{}{}
		}
		c = make(chan struct{})
		n.ch[ns] = c
	}
	return c
}

// NotifyInsert wakes the awaitData cursors of ns. The write path calls it from an OnCommit
// hook of every unit that inserted into a capped collection (index.Collections'
// SetCappedInsertHook, installed by the command layer): commands on a standalone or primary
// and a secondary's applier alike. Cheap when nobody waits.
func (m *Manager) NotifyInsert(ns string) {
	n := &m.inserts
	n.mu.Lock()
	if c, ok := n.ch[ns]; ok {
		close(c)
		delete(n.ch, ns)
	}
	n.mu.Unlock()
}

// AwaitStats is the server's awaitData wait counters (tests assert on them: a replicated
// write must reach the fetcher through a notification, not through the end of a long poll).
func (m *Manager) AwaitStats() *AwaitDataStats { return &m.awaitStats }
