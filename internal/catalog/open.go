package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/storage"
)

const (
	// catalogIdentName is the durable catalog (timestamped).
	catalogIdentName = "_mdb_catalog"
	// localCatalogIdentName holds the entries of the local database (untimestamped, like
	// the local database's tables, so RecoverToStable keeps them together).
	localCatalogIdentName = "_mdb_catalog_local"

	defaultReapInterval = time.Second
)

// Open opens the catalog on e with the default Config. See OpenWithConfig.
func Open(ctx context.Context, e *storage.Engine) (*Catalog, error) {
	return OpenWithConfig(ctx, e, Config{})
}

// OpenWithConfig creates the catalog tables if needed, loads every entry and reconciles the
// catalog with the storage engine's idents (startup reconciliation):
//   - an entry whose record store or index table is missing is an error (the data is gone;
//     repair is needed);
//   - drop-pending records are handed back to the reaper;
//   - collection-* and index-* idents that no entry references and that are not drop
//     pending are orphans (a crash between creating a table and committing its entry, or
//     entries rolled back by recovery) and are dropped;
//   - internal-* idents (the temporary side-writes, skipped-record and duplicate-key tables
//     of index builds) are dropped: nothing survives a restart that could use them, since
//     builds are not resumable and interrupted builds restart from scratch.
//
// It then starts the drop-pending reaper, stopped by Close.
func OpenWithConfig(ctx context.Context, e *storage.Engine, cfg Config) (*Catalog, error) {
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = defaultReapInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Catalog{
		e:        e,
		cfg:      cfg,
		units:    map[*storage.RecoveryUnit]*unitState{},
		reserved: map[string]*unitState{},
		log:      cfg.Logger.With("c", "STORAGE"),
	}
	c.reaper = newReaper(c)
	for _, t := range []struct {
		name string
		opts storage.IdentOptions
	}{
		{catalogIdentName, storage.IdentOptions{}},
		{localCatalogIdentName, storage.IdentOptions{Untimestamped: true}},
		{dropPendingIdentName, storage.IdentOptions{}},
	} {
		if e.HasIdent(t.name) {
			continue
		}
		if err := e.CreateIdent(t.name, t.opts); err != nil && !errors.Is(err, storage.ErrIdentExists) {
			return nil, fmt.Errorf("catalog: creating %s: %w", t.name, err)
		}
	}
	var err error
	if c.rs, err = storage.OpenRecordStore(e, catalogIdentName); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if c.localRS, err = storage.OpenRecordStore(e, localCatalogIdentName); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.reload(true); err != nil {
		return nil, err
	}
	c.reaper.start(cfg.ReapInterval)
	return c, nil
}

// Close stops the reaper. It does not close the engine.
func (c *Catalog) Close() error {
	c.reaper.stop()
	return nil
}

// Latest returns the newest committed CollectionCatalog instance (lock free). It reflects
// every DDL whose unit committed and ran its commit hooks; see At for reads at a timestamp.
func (c *Catalog) Latest() *Snapshot { return c.latest.Load() }

// At returns the catalog as of ru's read source (historical instantiation):
//   - ReadProvided at a timestamp no older than the Latest instance's DDL timestamp, with no
//     DDL in the middle of committing, returns Latest (no IO);
//   - anything else (older timestamps, ReadNoTimestamp, ReadAllDurable, reads inside a unit
//     that may see its own DDL) builds an instance from the durable catalog read through
//     ru's snapshot. The result is private to the caller; keep it for the operation.
//
// Untimestamped readers that only need the newest catalog should use Latest and pair it with
// their snapshot (get Latest, open the snapshot, check Latest did not change).
func (c *Catalog) At(ru *storage.RecoveryUnit) (*Snapshot, error) {
	src, ts := ru.ReadSource()
	if src == storage.ReadProvided && !ru.InUnitOfWork() {
		s1 := c.latest.Load()
		active := c.ddlActive.Load()
		s2 := c.latest.Load()
		if active == 0 && s1 == s2 && ts >= s1.ddlTs {
			return s1, nil
		}
	}
	metas, err := c.scan(ru)
	if err != nil {
		return nil, err
	}
	var snapTs optime.Timestamp
	if src == storage.ReadProvided {
		snapTs = ts
	}
	return newSnapshot(metas, snapTs), nil
}

// scan decodes every durable catalog entry visible to ru.
func (c *Catalog) scan(ru *storage.RecoveryUnit) ([]*CollectionMeta, error) {
	var out []*CollectionMeta
	for _, rs := range []*storage.RecordStore{c.rs, c.localRS} {
		cur, err := rs.NewCursor(ru, false)
		if err != nil {
			return nil, fmt.Errorf("catalog: scanning %s: %w", rs.Ident(), err)
		}
		for {
			id, raw, ok := cur.Next()
			if !ok {
				break
			}
			if !id.IsLong() {
				cur.Close()
				return nil, errCorrupt("non-integer catalog id %v", id)
			}
			m, err := decodeEntry(id.Int64(), raw)
			if err != nil {
				cur.Close()
				return nil, err
			}
			out = append(out, m)
		}
		err = cur.Err()
		cur.Close()
		if err != nil {
			return nil, fmt.Errorf("catalog: scanning %s: %w", rs.Ident(), err)
		}
	}
	return out, nil
}

// ReloadAfterRecovery rebuilds the in-memory catalog and the drop-pending list from disk
// after storage RecoverToStable (replication rollback, startup recovery), and reconciles
// idents as Open does: tables of collections created after the stable timestamp become
// orphans and are dropped. The caller must exclude all other catalog users (global X lock).
// Unlike Open it keeps internal-* tables: an index build of this process may still own them.
func (c *Catalog) ReloadAfterRecovery() error {
	c.ddlMu.Lock()
	defer c.ddlMu.Unlock()
	c.reaper.passMu.Lock()
	defer c.reaper.passMu.Unlock()
	return c.reload(false)
}

// reload loads the catalog from disk, reconciles idents and installs the result. Callers
// exclude DDL and reaper passes. At startup (no index build can be running yet) the
// temporary tables of builds interrupted by the shutdown are dropped as well.
func (c *Catalog) reload(startup bool) error {
	e := c.e
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	metas, err := c.scan(ru)
	if err != nil {
		return err
	}
	// Everything on disk was committed at or before this bound, so a read at an older
	// timestamp must not use the loaded instance (it goes through At's scan instead).
	loadTs := max(e.StableTimestamp(), e.OldestTimestamp(), e.AllDurableTimestamp())

	referenced := map[string]bool{}
	var missing []string
	nextLocal := int64(-1)
	for _, m := range metas {
		m.MinValidSnapshot, m.MinValidLoaded = loadTs, true
		if m.CatalogID <= nextLocal {
			nextLocal = m.CatalogID - 1
		}
		referenced[m.Ident] = true
		if !e.HasIdent(m.Ident) {
			missing = append(missing, fmt.Sprintf("%s (collection table %s)", m.NS, m.Ident))
		}
		for i := range m.Indexes {
			ix := &m.Indexes[i]
			referenced[ix.Ident] = true
			if !e.HasIdent(ix.Ident) {
				missing = append(missing, fmt.Sprintf("%s index %s (table %s)", m.NS, ix.Name, ix.Ident))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("catalog: entries reference missing tables: %s: %w",
			strings.Join(missing, ", "), storage.ErrCorrupt)
	}

	pending := map[string]dropPending{}
	var stale []string
	cur, err := ru.NewCursor(dropPendingIdentName, storage.CursorOptions{})
	if err != nil {
		return fmt.Errorf("catalog: scanning %s: %w", dropPendingIdentName, err)
	}
	for ok := cur.First(); ok; ok = cur.Next() {
		ident := string(cur.Key())
		if referenced[ident] || !e.HasIdent(ident) {
			stale = append(stale, ident)
			continue
		}
		p := dropPending{pendingIdent: pendingIdent{ident: ident}, dropTs: loadTs}
		doc := bsoncore.Document(cur.Value())
		if doc.Validate() == nil {
			p.ns, _ = lookupString(doc, "ns")
			p.index, _ = lookupString(doc, "index")
		}
		pending[ident] = p
	}
	err = cur.Err()
	cur.Close()
	if err != nil {
		return fmt.Errorf("catalog: scanning %s: %w", dropPendingIdentName, err)
	}

	var orphans []string
	for _, ident := range e.ListIdents() {
		if (isCatalogOwnedIdent(ident) || (startup && isTemporaryIdent(ident))) && !referenced[ident] {
			if _, ok := pending[ident]; !ok {
				orphans = append(orphans, ident)
			}
		}
	}
	sort.Strings(orphans)
	for _, ident := range orphans {
		if err := e.DropIdent(ident); err != nil && !errors.Is(err, storage.ErrNoSuchIdent) {
			return fmt.Errorf("catalog: dropping orphaned table %s: %w", ident, err)
		}
		c.log.Info("dropped table not referenced by the catalog", "ident", ident)
	}

	c.mu.Lock()
	c.latest.Store(newSnapshot(metas, loadTs))
	c.nextLocalID = nextLocal
	c.mu.Unlock()
	r := c.reaper
	r.mu.Lock()
	r.pending = pending
	r.stale = stale
	r.mu.Unlock()
	if len(pending) > 0 {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return nil
}
