package lsc

import (
	"context"
	"fmt"
	"time"
)

// Store is the sessions collection, config.system.sessions (MongoDB's SessionsCollection).
// Its documents are {_id: {id, uid}, lastUse: Date, user?: {name}}.
type Store interface {
	// Setup creates the collection and its TTL index on lastUse (lsidTTLIndex, expiring after
	// the session timeout) or corrects the index's expireAfterSeconds.
	Setup(ctx context.Context) error
	// Exists reports whether the collection exists with its TTL index.
	Exists(ctx context.Context) (bool, error)
	// Refresh upserts recs with lastUse = now.
	Refresh(ctx context.Context, recs []Record, now time.Time) error
	// Remove deletes the records of keys.
	Remove(ctx context.Context, keys []Key) error
	// FindRemoved returns the keys that have no record.
	FindRemoved(ctx context.Context, keys []Key) ([]Key, error)
}

// Service is what a refresh needs from the server (MongoDB's ServiceLiaison).
type Service interface {
	// ActiveOpSessions are the sessions of the operations running now.
	ActiveOpSessions() []Key
	// OpenCursorSessions are the sessions of the open cursors.
	OpenCursorSessions() []Key
	// KillCursors kills the cursors of the sessions match selects and returns how many.
	KillCursors(match func(Key) bool) int
}

// Stats are serverStatus's logicalSessionRecordCache counters (besides activeSessionsCount).
type Stats struct {
	SessionsCollectionJobCount                int64
	LastSessionsCollectionJobDurationMillis   int64
	LastSessionsCollectionJobTimestamp        time.Time
	LastSessionsCollectionJobEntriesRefreshed int64
	LastSessionsCollectionJobEntriesEnded     int64
	LastSessionsCollectionJobCursorsClosed    int64
	TransactionReaperJobCount                 int64
	LastTransactionReaperJobDurationMillis    int64
	LastTransactionReaperJobTimestamp         time.Time
	LastTransactionReaperJobEntriesCleanedUp  int64
}

// Stats returns the refresh and reap counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Refresh is one refresh of the cache against store (MongoDB's LogicalSessionCacheImpl
// _refresh). writable says whether this node writes the sessions collection (a standalone
// or a writable primary): a node that does not only forgets its recently used sessions and
// kills the cursors of ended and expired ones (MongoDB forwards a secondary's refresh to
// the primary; here the primary persists what is used on it).
//
// In order: set the collection up; take the recently used and the ended sessions out of the
// cache; upsert the recently used ones and those of running operations, except ended ones;
// remove the ended ones; kill the cursors of the ended sessions and of cursor sessions, not
// used again meanwhile, whose record is gone (expired by the TTL index). On a failed upsert
// or removal the taken sessions go back into the cache for the next refresh.
func (c *Cache) Refresh(ctx context.Context, store Store, svc Service, writable bool) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	start := c.now()
	c.mu.Lock()
	c.stats.LastSessionsCollectionJobTimestamp = start
	c.stats.SessionsCollectionJobCount++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.stats.LastSessionsCollectionJobDurationMillis = c.now().Sub(start).Milliseconds()
		c.mu.Unlock()
	}()

	if writable {
		if err := store.Setup(ctx); err != nil {
			return fmt.Errorf("set up the sessions collection: %w", err)
		}
	}

	c.mu.Lock()
	active, ending := c.active, c.ending
	c.active, c.ending = map[Key]*Record{}, map[Key]time.Time{}
	c.mu.Unlock()

	for k := range ending {
		delete(active, k)
	}
	now := c.now()
	recs := make([]Record, 0, len(active))
	seen := make(map[Key]bool, len(active))
	for _, k := range svc.ActiveOpSessions() {
		if _, ended := ending[k]; ended || seen[k] {
			continue
		}
		seen[k] = true
		if r, ok := active[k]; ok {
			recs = append(recs, *r)
		} else {
			// A running op's session without a cache entry: no user name known.
			recs = append(recs, Record{Key: k, LastUse: now})
		}
	}
	for k, r := range active {
		if !seen[k] {
			recs = append(recs, *r)
		}
	}
	endingKeys := make([]Key, 0, len(ending))
	for k := range ending {
		endingKeys = append(endingKeys, k)
	}

	if writable {
		if err := store.Refresh(ctx, recs, now); err != nil {
			c.restore(active, ending)
			return fmt.Errorf("refresh sessions: %w", err)
		}
		if err := store.Remove(ctx, endingKeys); err != nil {
			c.restore(nil, ending)
			return fmt.Errorf("remove ended sessions: %w", err)
		}
	}
	c.mu.Lock()
	c.stats.LastSessionsCollectionJobEntriesRefreshed = int64(len(recs))
	c.stats.LastSessionsCollectionJobEntriesEnded = int64(len(endingKeys))
	c.mu.Unlock()

	// Cursor sessions not used since the swap whose record is gone have expired.
	kill := make(map[Key]bool, len(ending))
	for k := range ending {
		kill[k] = true
	}
	var candidates []Key
	c.mu.Lock()
	for _, k := range svc.OpenCursorSessions() {
		if _, used := c.active[k]; !used && !kill[k] {
			candidates = append(candidates, k)
		}
	}
	c.mu.Unlock()
	if len(candidates) > 0 {
		if exists, err := store.Exists(ctx); err == nil && exists {
			if removed, err := store.FindRemoved(ctx, candidates); err == nil {
				for _, k := range removed {
					kill[k] = true
				}
			}
		}
	}
	closed := 0
	if len(kill) > 0 {
		closed = svc.KillCursors(func(k Key) bool { return kill[k] })
	}
	c.mu.Lock()
	c.stats.LastSessionsCollectionJobCursorsClosed = int64(closed)
	c.mu.Unlock()
	return nil
}

// restore puts taken sessions back after a failed refresh, keeping newer uses.
func (c *Cache) restore(active map[Key]*Record, ending map[Key]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range active {
		if _, ok := c.active[k]; !ok {
			c.active[k] = r
		}
	}
	for k, at := range ending {
		if _, ok := c.ending[k]; !ok {
			c.ending[k] = at
		}
	}
}

// TxnRecord is a config.transactions entry as the reaper sees it: its session and its _id
// as stored.
type TxnRecord struct {
	Key Key
	ID  []byte // the _id document
}

// TxnTable is config.transactions, the transactions table.
type TxnTable interface {
	// OlderThan returns the entries whose lastWriteDate is before t.
	OlderThan(ctx context.Context, t time.Time) ([]TxnRecord, error)
	// Remove deletes the entries and returns how many it deleted.
	Remove(ctx context.Context, recs []TxnRecord) (int, error)
}

// Reap removes the config.transactions entries last written before olderThan whose session
// is gone from the sessions collection and is not in use (inUse: a running operation's or
// checked-out session; sessions used since the last refresh count as in use too), MongoDB's
// reapSessionsOlderThan. It does nothing while the sessions collection does not exist (every
// session would look expired). The OnReap hooks get the reaped sessions. It returns how
// many entries it removed. Only a node that writes (standalone, primary) reaps.
func (c *Cache) Reap(ctx context.Context, store Store, txns TxnTable, olderThan time.Time, inUse func(Key) bool) (int, error) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	start := c.now()
	c.mu.Lock()
	c.stats.LastTransactionReaperJobTimestamp = start
	c.stats.TransactionReaperJobCount++
	c.mu.Unlock()
	n, err := c.reap(ctx, store, txns, olderThan, inUse)
	c.mu.Lock()
	c.stats.LastTransactionReaperJobDurationMillis = c.now().Sub(start).Milliseconds()
	if err == nil {
		c.stats.LastTransactionReaperJobEntriesCleanedUp = int64(n)
	}
	c.mu.Unlock()
	return n, err
}

func (c *Cache) reap(ctx context.Context, store Store, txns TxnTable, olderThan time.Time, inUse func(Key) bool) (int, error) {
	exists, err := store.Exists(ctx)
	if err != nil || !exists {
		return 0, err
	}
	old, err := txns.OlderThan(ctx, olderThan)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	byKey := make(map[Key][]TxnRecord, len(old))
	var keys []Key
	c.mu.Lock()
	for _, r := range old {
		if _, used := c.active[r.Key]; used || (inUse != nil && inUse(r.Key)) {
			continue
		}
		if _, dup := byKey[r.Key]; !dup {
			keys = append(keys, r.Key)
		}
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	c.mu.Unlock()
	if len(keys) == 0 {
		return 0, nil
	}
	removed, err := store.FindRemoved(ctx, keys)
	if err != nil || len(removed) == 0 {
		return 0, err
	}
	var recs []TxnRecord
	for _, k := range removed {
		recs = append(recs, byKey[k]...)
	}
	n, err := txns.Remove(ctx, recs)
	if err != nil {
		return n, err
	}
	c.notifyReap(removed)
	return n, nil
}
