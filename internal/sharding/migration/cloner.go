package migration

import (
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/storage"
)

// Range is a chunk range [Min, Max) of shard keys of one collection.
type Range struct {
	Pattern  *shardkey.Pattern
	Min, Max bsoncore.Document
}

// Contains reports whether doc's shard key is in the range.
func (r Range) Contains(doc bsoncore.Document) bool {
	key, err := r.Pattern.ExtractKey(doc)
	if err != nil {
		return false
	}
	return bsonutil.CompareDocuments(key, r.Min) >= 0 && bsonutil.CompareDocuments(key, r.Max) < 0
}

// Cloner is the donor's MigrationChunkClonerSource for one migration: the _ids of the range
// to clone (collected once, before the clone starts) and the _ids the donor's writes touched
// since tracking started (reload: inserted or updated in the range; deleted: deleted from
// it), handed out by _transferMods.
type Cloner struct {
	SessionID string
	NS        string
	UUID      catalog.UUID
	Range     Range

	mu      sync.Mutex
	toClone []bsoncore.Value // not yet handed out by _migrateClone
	reload  map[string]bsoncore.Value
	deleted map[string]bsoncore.Value
	// cloned and clonedBytes count what _migrateClone handed out.
	cloned, clonedBytes int64
	// sessions is the migration's session history (set before tracking starts; nil in
	// tests that move documents only).
	sessions *SessionSource
}

// NewCloner returns a cloner tracking nothing yet.
func NewCloner(sessionID, ns string, uuid catalog.UUID, r Range) *Cloner {
	return &Cloner{SessionID: sessionID, NS: ns, UUID: uuid, Range: r,
		reload: map[string]bsoncore.Value{}, deleted: map[string]bsoncore.Value{}}
}

func idKey(id bsoncore.Value) string { return string(id.Data) + string(rune(id.Type)) }

func copyValue(v bsoncore.Value) bsoncore.Value {
	return bsoncore.Value{Type: v.Type, Data: append([]byte(nil), v.Data...)}
}

func (c *Cloner) noteReload(id bsoncore.Value) {
	c.mu.Lock()
	c.reload[idKey(id)] = id
	c.mu.Unlock()
}

func (c *Cloner) noteDelete(id bsoncore.Value) {
	c.mu.Lock()
	c.deleted[idKey(id)] = id
	c.mu.Unlock()
}

// setToClone installs the _ids collected by the initial scan.
func (c *Cloner) setToClone(ids []bsoncore.Value) {
	c.mu.Lock()
	c.toClone = ids
	c.mu.Unlock()
}

// nextCloneIDs takes up to n _ids to clone.
func (c *Cloner) nextCloneIDs(n int) []bsoncore.Value {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > len(c.toClone) {
		n = len(c.toClone)
	}
	ids := c.toClone[:n]
	c.toClone = c.toClone[n:]
	return ids
}

func (c *Cloner) addCloned(docs, bytes int64) {
	c.mu.Lock()
	c.cloned += docs
	c.clonedBytes += bytes
	c.mu.Unlock()
}

// modsBatch bounds the _ids of each kind one _transferMods hands out (the rest wait for the
// next call; the recipient calls until it gets none).
const modsBatch = 1024

// takeMods takes up to modsBatch recorded deletes and reloads.
func (c *Cloner) takeMods() (deleted, reload []bsoncore.Value) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.deleted {
		if len(deleted) == modsBatch {
			break
		}
		deleted = append(deleted, v)
		delete(c.deleted, k)
	}
	for k, v := range c.reload {
		if len(reload) == modsBatch {
			break
		}
		reload = append(reload, v)
		delete(c.reload, k)
	}
	return deleted, reload
}

// Tracker is the node's index.DocListener: it feeds the active cloner from the donor's
// document writes (recorded only when the write commits, as MigrationChunkClonerSource's
// op observer hooks do), and marks the recipient's own writes fromMigrate.
type Tracker struct {
	mu     sync.RWMutex
	cloner *Cloner
	marked sync.Map // *storage.RecoveryUnit → struct{}: writes of a migration
}

// Start makes c the cloner the donor's writes feed; Stop(c) ends it.
func (t *Tracker) Start(c *Cloner) {
	t.mu.Lock()
	t.cloner = c
	t.mu.Unlock()
}

// Stop ends c's tracking.
func (t *Tracker) Stop(c *Cloner) {
	t.mu.Lock()
	if t.cloner == c {
		t.cloner = nil
	}
	t.mu.Unlock()
}

func (t *Tracker) active(ns string, uuid catalog.UUID) *Cloner {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if c := t.cloner; c != nil && c.NS == ns && c.UUID == uuid {
		return c
	}
	return nil
}

// Mark makes ru's writes a migration's (fromMigrate, not tracked) until the returned
// function runs.
func (t *Tracker) Mark(ru *storage.RecoveryUnit) (unmark func()) {
	t.marked.Store(ru, struct{}{})
	return func() { t.marked.Delete(ru) }
}

// FromMigrate implements index.DocListener.
func (t *Tracker) FromMigrate(ru *storage.RecoveryUnit) bool {
	_, ok := t.marked.Load(ru)
	return ok
}

// OnInserts implements index.DocListener.
func (t *Tracker) OnInserts(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, docs []bsoncore.Document, fromMigrate bool) {
	c := t.active(ns, uuid)
	if c == nil || fromMigrate {
		return
	}
	var ids []bsoncore.Value
	for _, d := range docs {
		if c.Range.Contains(d) {
			ids = append(ids, copyValue(d.Lookup("_id")))
		}
	}
	if len(ids) > 0 {
		lsid := c.sessionOf(ru)
		ru.OnCommit(func(_ optime.Timestamp) {
			for _, id := range ids {
				c.noteReload(id)
			}
			c.noteSession(lsid)
		})
	}
}

// sessionOf returns a copy of the lsid of the retryable write ru runs (nil for others; an
// empty lsid for a multi-document transaction's write, whose session the unit does not
// name).
func (c *Cloner) sessionOf(ru *storage.RecoveryUnit) bsoncore.Document {
	if c.sessions == nil {
		return nil
	}
	if s := opobserver.Session(ru); s != nil && len(s.LSID) > 0 {
		return append(bsoncore.Document(nil), s.LSID...)
	}
	if opobserver.Transaction(ru) != nil {
		return bsoncore.Document{}
	}
	return nil
}

// noteSession makes the session history walk lsid's chain again (its write in the range
// committed), or, for a transaction's write, look for newly committed transactions.
func (c *Cloner) noteSession(lsid bsoncore.Document) {
	switch {
	case lsid == nil:
	case len(lsid) == 0:
		c.sessions.NoteTransactionCommitted()
	default:
		c.sessions.NoteSession(lsid)
	}
}

// OnUpdate implements index.DocListener: a post-image in the range is reloaded, a document
// that left the range is deleted on the recipient.
func (t *Tracker) OnUpdate(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, args *opobserver.OnUpdateArgs) {
	c := t.active(ns, uuid)
	if c == nil || args.FromMigrate {
		return
	}
	id := copyValue(args.ID)
	lsid := c.sessionOf(ru)
	switch {
	case c.Range.Contains(args.Post):
		ru.OnCommit(func(_ optime.Timestamp) { c.noteReload(id); c.noteSession(lsid) })
	case args.Pre != nil && c.Range.Contains(args.Pre):
		ru.OnCommit(func(_ optime.Timestamp) { c.noteDelete(id); c.noteSession(lsid) })
	}
}

// OnDelete implements index.DocListener.
func (t *Tracker) OnDelete(ru *storage.RecoveryUnit, ns string, uuid catalog.UUID, id bsoncore.Value, pre bsoncore.Document, fromMigrate bool) {
	c := t.active(ns, uuid)
	if c == nil || fromMigrate {
		return
	}
	if pre != nil && !c.Range.Contains(pre) {
		return
	}
	idc := copyValue(id)
	lsid := c.sessionOf(ru)
	ru.OnCommit(func(_ optime.Timestamp) { c.noteDelete(idc); c.noteSession(lsid) })
}

// cloneBatchBytes bounds a _migrateClone or _transferMods reply's documents (MongoDB fills
// up to BSONObjMaxUserSize; the reply must stay under the 16 MB message limit with its
// envelope).
const cloneBatchBytes = 15 * 1024 * 1024

// MigrateCloneBatch serves one _migrateClone: the next documents of the range, fetched by
// _id (a document deleted since the scan is skipped: its delete is in the mods). An empty
// batch means the initial clone is done.
func (c *Cloner) MigrateCloneBatch(ctx context.Context, l *Local) ([]bsoncore.Document, error) {
	var out []bsoncore.Document
	size := 0
	for size < cloneBatchBytes {
		ids := c.nextCloneIDs(256)
		if len(ids) == 0 {
			break
		}
		docs, err := l.FetchByIDs(ctx, c.NS, ids)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if !c.Range.Contains(d) {
				continue // moved out of the range since: its update is tracked
			}
			out = append(out, d)
			size += len(d)
		}
	}
	c.addCloned(int64(len(out)), int64(size))
	return out, nil
}

// TransferMods serves one _transferMods: the _ids deleted and the current documents of the
// _ids reloaded since the last call (a reload whose document is gone or left the range
// becomes a delete).
func (c *Cloner) TransferMods(ctx context.Context, l *Local) (deleted []bsoncore.Value, reload []bsoncore.Document, err error) {
	deleted, ids := c.takeMods()
	docs, err := l.FetchByIDs(ctx, c.NS, ids)
	if err != nil {
		return nil, nil, err
	}
	found := map[string]bool{}
	for _, d := range docs {
		if c.Range.Contains(d) {
			reload = append(reload, d)
			found[idKey(d.Lookup("_id"))] = true
		}
	}
	for _, id := range ids {
		if !found[idKey(id)] {
			deleted = append(deleted, id)
		}
	}
	return deleted, reload, nil
}

// Progress returns the documents and bytes cloned so far.
func (c *Cloner) Progress() (docs, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cloned, c.clonedBytes
}
