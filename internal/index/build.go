package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index/sorter"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// maxIndexBuildMemoryUsageMegabytes is the server parameter bounding the external sorter of an
// index build (default 200).
var maxIndexBuildMemoryUsageMegabytes atomic.Int64

func init() { maxIndexBuildMemoryUsageMegabytes.Store(200) }

// SetMaxIndexBuildMemoryUsageMegabytes sets maxIndexBuildMemoryUsageMegabytes (>= 1) for builds
// that start afterwards.
func SetMaxIndexBuildMemoryUsageMegabytes(mb int64) error {
	if mb < 1 {
		return mongoerr.Newf(mongoerr.BadValue, "maxIndexBuildMemoryUsageMegabytes must be at least 1, got %d", mb)
	}
	maxIndexBuildMemoryUsageMegabytes.Store(mb)
	return nil
}

// MaxIndexBuildMemoryUsageMegabytes returns the current setting.
func MaxIndexBuildMemoryUsageMegabytes() int64 { return maxIndexBuildMemoryUsageMegabytes.Load() }

// BuildOptions tune Build.
type BuildOptions struct {
	// BlockWrites excludes writers to the collection until unblock is called: it must wait for
	// every write unit in progress to end. The commands layer passes a collection MODE_S lock
	// acquisition (LockManagerBlockWrites); nil means the Collection's default gate
	// (Collection.BlockWrites). An error aborts the build.
	BlockWrites func() (unblock func(), err error)
	// MaxMemoryBytes bounds the external sorter; 0 means maxIndexBuildMemoryUsageMegabytes.
	MaxMemoryBytes int64
	// TempDir holds sorter spill files (os.TempDir() when empty).
	TempDir string
	// YieldEvery is how many documents the collection scan reads between yields (release of
	// the storage snapshot); default 1000.
	YieldEvery int
	// BatchSize is the number of keys per unit of work in bulk load and drains; default 1000.
	BatchSize int
	// BuildUUID names the build in the catalog (generated when nil).
	BuildUUID *catalog.UUID
	// Hook, when set, is called at phase boundaries ("registered", "scanned", "loaded",
	// "drained", "final") for tests.
	Hook func(phase string)
	// Log receives RestartUnfinishedBuilds' messages (slog.Default() when nil).
	Log *slog.Logger
	// IndexWriteTimestamp, when set, stamps the build's writes to the index tables (bulk
	// load, drains, skipped records) instead of engine-assigned timestamps. A secondary
	// sets it to its startIndexBuild entry's timestamp: the oplog entries it applies after
	// the commit may carry timestamps older than its clock, and a key they delete must not
	// be hidden behind a newer version the build wrote (MongoDB's builds write such keys
	// untimestamped).
	IndexWriteTimestamp optime.Timestamp
}

// BuildStats describe a finished build.
type BuildStats struct {
	Scanned    int64 // documents read by the collection scan
	KeysLoaded int64 // keys bulk-loaded from the sorter
	SideWrites int64 // side-writes table records applied
	Skipped    int64 // records whose key generation failed during the scan
	Spills     int   // sorter runs spilled to disk
}

// Side-writes record operations.
const (
	sideInsert byte = 1
	sideRemove byte = 2
)

// interceptor is MongoDB's IndexBuildInterceptor: writes to the collection during a build
// record their key inserts and removals for the new index in the side-writes table (in the
// writer's own unit), and documents whose keys cannot be generated in the skipped-record table.
type interceptor struct {
	ix      *Index
	side    string // side-writes table: key = seq (8 bytes BE), value = op record
	skipped string // skipped-record table: key = rid.Key()
	seq     atomic.Uint64
}

// isKeyGenError reports errors that are properties of a document under this key pattern, which
// builds defer to the skipped-record table.
func isKeyGenError(err error) bool {
	switch mongoerr.CodeOf(err) {
	case mongoerr.CannotIndexParallelArrays, mongoerr.CannotBuildIndexKeys, codeHashedArray, codeAmbiguousPositional:
		return true
	}
	return false
}

// sideRecord encodes one side write: op, uvarint(prefixLen), uvarint(fullLen), full, TypeBits.
func appendSideRecord(dst []byte, op byte, prefixLen int, full, tb []byte) []byte {
	dst = append(dst, op)
	dst = binary.AppendUvarint(dst, uint64(prefixLen))
	dst = binary.AppendUvarint(dst, uint64(len(full)))
	dst = append(dst, full...)
	return append(dst, tb...)
}

func decodeSideRecord(v []byte) (op byte, prefix, full, tb []byte, err error) {
	bad := mongoerr.New(mongoerr.DataCorruptionDetected, "corrupt side-writes record")
	if len(v) < 1 {
		return 0, nil, nil, nil, bad
	}
	op = v[0]
	p, n1 := binary.Uvarint(v[1:])
	if n1 <= 0 {
		return 0, nil, nil, nil, bad
	}
	f, n2 := binary.Uvarint(v[1+n1:])
	if n2 <= 0 {
		return 0, nil, nil, nil, bad
	}
	rest := v[1+n1+n2:]
	if f > uint64(len(rest)) || p > f || (op != sideInsert && op != sideRemove) {
		return 0, nil, nil, nil, bad
	}
	full = rest[:f]
	return op, full[:p], full, rest[f:], nil
}

func (it *interceptor) write(ru *storage.RecoveryUnit, s *scratch, op byte, k *keys, e encodedKey) error {
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], it.seq.Add(1))
	s.val = appendSideRecord(s.val[:0], op, e.prefixLen, k.full(e), k.typeBits(e))
	return ru.Put(it.side, key[:], s.val)
}

func (it *interceptor) skip(ru *storage.RecoveryUnit, rid recordid.ID) error {
	return ru.Put(it.skipped, rid.Key(), nil)
}

func (it *interceptor) onInsert(ru *storage.RecoveryUnit, s *scratch, doc bsoncore.Document, rid recordid.ID) error {
	k := &s.k[0]
	if err := it.ix.genKeys(s, doc, rid, k); err != nil {
		if isKeyGenError(err) {
			k.list, k.multikey = k.list[:0], false
			return it.skip(ru, rid)
		}
		return err
	}
	for _, e := range k.list {
		if err := it.write(ru, s, sideInsert, k, e); err != nil {
			return err
		}
	}
	return nil
}

func (it *interceptor) onDelete(ru *storage.RecoveryUnit, s *scratch, doc bsoncore.Document, rid recordid.ID) error {
	k := &s.k[0]
	if err := it.ix.genKeys(s, doc, rid, k); err != nil {
		if isKeyGenError(err) {
			return nil // never indexed; the skipped-record recheck finds the record gone
		}
		return err
	}
	for _, e := range k.list {
		if err := it.write(ru, s, sideRemove, k, e); err != nil {
			return err
		}
	}
	return nil
}

func (it *interceptor) onUpdate(ru *storage.RecoveryUnit, s *scratch, oldDoc, newDoc bsoncore.Document, rid recordid.ID) (bool, error) {
	ok, nk := &s.k[0], &s.k[1]
	if err := it.ix.genKeys(s, oldDoc, rid, ok); err != nil {
		if !isKeyGenError(err) {
			return false, err
		}
		ok.list = ok.list[:0]
	}
	if err := it.ix.genKeys(s, newDoc, rid, nk); err != nil {
		if !isKeyGenError(err) {
			return false, err
		}
		nk.list, nk.multikey = nk.list[:0], false
		if err := it.skip(ru, rid); err != nil {
			return false, err
		}
	}
	err := diffKeys(ok, nk,
		func(e encodedKey) error { return it.write(ru, s, sideRemove, ok, e) },
		func(e encodedKey) error { return it.write(ru, s, sideInsert, nk, e) })
	return nk.multikey, err
}

// builder is the state of one hybrid index build.
type builder struct {
	ctx     context.Context
	coll    *Collection
	opts    BuildOptions
	ns      string
	name    string
	it      *interceptor
	ix      *Index
	dups    string // duplicate-key table: key = KeyString prefix
	wru     *storage.RecoveryUnit
	stats   BuildStats
	mk      []uint64 // union of multikey components seen by the build itself
	mkAny   bool
	s       *scratch
	created []string          // temporary idents to drop at the end
	spec    bsoncore.Document // the index spec as the catalog stored it
}

// Build builds the index described by spec ({key, name, unique, sparse, ...}) on coll with
// MongoDB's hybrid procedure (spec: "Index Builds", "Hybrid Index Builds"):
//
//  1. with writes blocked: add the index to the catalog (ready: false) and install the
//     interceptor, so every write that commits later records its keys in the side table;
//  2. scan the collection with periodic yields, feeding keys to the external sorter and
//     recording documents whose key generation fails in the skipped-record table;
//  3. bulk-load the sorted keys in batches of units, recording adjacent duplicate KeyStrings
//     of unique indexes in the duplicate-key table;
//  4. drain the side table while writers run, until it is (nearly) empty;
//  5. with writes blocked: drain the rest, re-generate keys of skipped records, re-check every
//     recorded duplicate, persist multikey, mark the index ready and remove the interceptor.
//
// Failures (DuplicateKey 11000, CannotIndexParallelArrays 171, cancellation) remove the index
// from the catalog and drop every table the build created. The _id index cannot be built
// this way (the catalog creates it with the collection).
func Build(ctx context.Context, coll *Collection, spec bsoncore.Document, opts BuildOptions) (meta *catalog.IndexMeta, stats BuildStats, err error) {
	opts = opts.withDefaults(coll)
	b := newBuilder(ctx, coll, opts)
	defer b.close()

	if err := b.register(spec); err != nil {
		return nil, b.stats, err
	}
	b.hook("registered")
	err = b.run()
	if err == nil {
		err = b.commit()
	}
	if err != nil {
		if aerr := b.abort(); aerr != nil {
			err = fmt.Errorf("%w (and cleanup failed: %v)", err, aerr)
		}
		return nil, b.stats, err
	}
	b.dropTemps()
	m, _ := coll.cat.Latest().ByUUID(coll.uuid)
	if m != nil {
		if im, ok := m.Index(b.name); ok {
			cp := *im
			meta = &cp
		}
	}
	return meta, b.stats, nil
}

// withDefaults fills in the zero fields of opts.
func (opts BuildOptions) withDefaults(coll *Collection) BuildOptions {
	if opts.BlockWrites == nil {
		opts.BlockWrites = coll.BlockWrites
	}
	if opts.YieldEvery <= 0 {
		opts.YieldEvery = 1000
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	if opts.MaxMemoryBytes <= 0 {
		opts.MaxMemoryBytes = MaxIndexBuildMemoryUsageMegabytes() << 20
	}
	if opts.BuildUUID == nil {
		u := catalog.NewUUID()
		opts.BuildUUID = &u
	}
	return opts
}

func newBuilder(ctx context.Context, coll *Collection, opts BuildOptions) *builder {
	return &builder{ctx: ctx, coll: coll, opts: opts, wru: coll.e.NewRecoveryUnit(), s: getScratch()}
}

// close releases the builder's recovery unit and scratch space.
func (b *builder) close() {
	b.wru.Close()
	putScratch(b.s)
}

func (b *builder) hook(phase string) {
	if b.opts.Hook != nil {
		b.opts.Hook(phase)
	}
}

// unit runs f in a WriteUnitOfWork on the build's own recovery unit, retrying write conflicts.
func (b *builder) unit(f func(ru *storage.RecoveryUnit) error) error {
	return storage.WriteConflictRetry(b.ctx, "indexBuild", func() error {
		defer b.wru.AbandonSnapshot()
		w := b.wru.BeginUnitOfWork()
		defer w.End()
		if err := f(b.wru); err != nil {
			return err
		}
		return w.Commit()
	})
}

// indexUnit is unit for the writes to the index table: stamped with
// BuildOptions.IndexWriteTimestamp when it is set.
func (b *builder) indexUnit(f func(ru *storage.RecoveryUnit) error) error {
	ts := b.opts.IndexWriteTimestamp
	if ts.IsNull() {
		return b.unit(f)
	}
	return b.unit(func(ru *storage.RecoveryUnit) error {
		if err := ru.SetTimestamp(ts); err != nil {
			return err
		}
		return f(ru)
	})
}

// register is phase 1 of a single-index build: with writes blocked, add the index not ready
// and install its interceptor in one unit.
func (b *builder) register(spec bsoncore.Document) error {
	unblock, err := b.opts.BlockWrites()
	if err != nil {
		return err
	}
	defer unblock()
	if err := b.prepare(); err != nil {
		return err
	}
	err = b.unit(func(ru *storage.RecoveryUnit) error { return b.registerIn(ru, spec) })
	if err != nil {
		b.cancelRegistration()
		return err
	}
	return nil
}

// prepare creates the build's temporary tables. Writes must be blocked.
func (b *builder) prepare() error {
	meta, ok := b.coll.cat.Latest().ByUUID(b.coll.uuid)
	if !ok {
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s was dropped", b.coll.uuid)
	}
	b.ns = meta.NS
	e := b.coll.e
	// Temporary tables carry the catalog's temporary prefix, so the catalog's startup
	// reconciliation drops those of a build interrupted by a crash.
	for _, kind := range []string{"sidewrites", "skipped", "dupkeys"} {
		kind = catalog.TemporaryIdentPrefix + kind
		name := e.NewIdentName(kind)
		if err := e.CreateIdent(name, storage.IdentOptions{}); err != nil {
			b.dropTemps()
			return err
		}
		b.created = append(b.created, name)
	}
	b.it = &interceptor{side: b.created[0], skipped: b.created[1]}
	b.dups = b.created[2]
	return nil
}

// registerIn adds the index (not ready, with the build's UUID) to the catalog in ru's unit
// and installs its interceptor. It may run again after a WriteConflict.
func (b *builder) registerIn(ru *storage.RecoveryUnit, spec bsoncore.Document) error {
	if b.ix != nil {
		// A retried attempt: the previous one's catalog change rolled back.
		b.unregister()
		b.ix = nil
	}
	im, err := b.coll.cat.AddIndex(ru, b.ns, spec, false, b.opts.BuildUUID)
	if err != nil {
		return err
	}
	if im.IsIDIndex() {
		return mongoerr.New(mongoerr.CannotCreateIndex, "the _id index is created with its collection")
	}
	ix, err := b.coll.newIndex(b.ns, im)
	if err != nil {
		return err
	}
	b.ix, b.it.ix, b.name = ix, ix, im.Name
	b.spec = im.Spec
	// Installed before the catalog change commits: any writer that can see the new index
	// also sees its interceptor.
	b.coll.mu.Lock()
	b.coll.builds[im.Ident] = b.it
	b.coll.mu.Unlock()
	buildGen.Add(1)
	return nil
}

// cancelRegistration undoes prepare and a registerIn whose unit did not commit.
func (b *builder) cancelRegistration() {
	if b.ix != nil {
		b.unregister()
		b.ix = nil
	}
	b.dropTemps()
}

func (b *builder) unregister() {
	b.coll.mu.Lock()
	delete(b.coll.builds, b.ix.ident)
	b.coll.mu.Unlock()
	buildGen.Add(1)
}

func (b *builder) dropTemps() {
	for _, name := range b.created {
		_ = b.coll.e.DropIdent(name)
	}
	b.created = nil
}

// abort removes the index and the temporary tables, with writers excluded so none is left
// writing to a dropped side table.
func (b *builder) abort() error {
	// Exclude writers with a context that ignores the build's cancellation: cleanup must run.
	unblock, err := b.opts.BlockWrites()
	if err != nil {
		// Leave the interceptor installed: writers keep feeding a table that still exists,
		// and the not-ready index stays in the catalog for dropIndexes to remove.
		return err
	}
	defer unblock()
	ctx := context.WithoutCancel(b.ctx)
	err = storage.WriteConflictRetry(ctx, "abortIndexBuild", func() error {
		defer b.wru.AbandonSnapshot()
		w := b.wru.BeginUnitOfWork()
		defer w.End()
		if err := b.coll.cat.DropIndex(b.wru, b.ns, b.name); err != nil {
			return err
		}
		return w.Commit()
	})
	b.unregister()
	b.dropTemps()
	return err
}

func (b *builder) run() error {
	srt := sorter.New(sorter.Options{MaxMemoryBytes: b.opts.MaxMemoryBytes, TempDir: tempDir(b.opts.TempDir)})
	defer srt.Close()
	if err := b.scan(srt); err != nil {
		return err
	}
	b.stats.Spills = srt.Stats().Spills
	b.hook("scanned")
	if err := b.bulkLoad(srt); err != nil {
		return err
	}
	srt.Close()
	b.hook("loaded")
	// Drain while writers run. Each pass applies what was committed when it started; stop
	// when a pass finds little left, then finish with writers blocked.
	for i := 0; i < 5; i++ {
		n, err := b.drain()
		if err != nil {
			return err
		}
		if n < int64(b.opts.BatchSize) {
			break
		}
	}
	b.hook("drained")
	return nil
}

func tempDir(d string) string {
	if d == "" {
		return os.TempDir()
	}
	return d
}

// scan is phase 2: read every record at a snapshot, yielding every YieldEvery documents.
func (b *builder) scan(srt *sorter.Sorter) error {
	ru := b.coll.e.NewRecoveryUnit()
	defer ru.Close()
	cur, err := b.coll.rs.NewCursor(ru, false)
	if err != nil {
		return err
	}
	defer cur.Close()
	k := &b.s.k[0]
	var skipped []recordid.ID
	n := 0
	for {
		rid, doc, ok := cur.Next()
		if !ok {
			if err := cur.Err(); storage.IsPrepareConflict(err) {
				// A record a prepared transaction wrote: wait until it commits or aborts and
				// read it then, in a new snapshot (the cursor redoes the move). Ignoring it
				// would miss a prepared write made before the build began, which the
				// side table never sees (transactions hold no locks between statements).
				cur.Save()
				ru.AbandonSnapshot()
				if err := storage.WaitPrepareConflict(b.ctx, err); err != nil {
					return mongoerr.Newf(mongoerr.IndexBuildAborted, "index build aborted: %v", err)
				}
				if _, err := cur.Restore(); err != nil && !storage.IsPrepareConflict(err) {
					return err
				}
				continue
			}
			break
		}
		b.stats.Scanned++
		if err := b.ix.genKeys(b.s, doc, rid, k); err != nil {
			if !isKeyGenError(err) {
				return err
			}
			skipped = append(skipped, rid)
		} else {
			for _, e := range k.list {
				if err := srt.Add(k.full(e), k.typeBits(e)); err != nil {
					return err
				}
			}
			b.noteMultikey(k)
		}
		if n++; n%b.opts.YieldEvery == 0 {
			cur.Save()
			ru.AbandonSnapshot()
			if err := b.ctx.Err(); err != nil {
				return mongoerr.Newf(mongoerr.IndexBuildAborted, "index build aborted: %v", err)
			}
			if _, err := cur.Restore(); err != nil && !storage.IsPrepareConflict(err) {
				return err // a prepare conflict surfaces at the next Next
			}
		}
	}
	if err := cur.Err(); err != nil {
		return err
	}
	if len(skipped) > 0 {
		b.stats.Skipped = int64(len(skipped))
		if err := b.unit(func(ru *storage.RecoveryUnit) error {
			for _, rid := range skipped {
				if err := b.it.skip(ru, rid); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) noteMultikey(k *keys) {
	if !k.multikey {
		return
	}
	b.mkAny = true
	if len(b.mk) < len(k.paths) {
		b.mk = append(b.mk, make([]uint64, len(k.paths)-len(b.mk))...)
	}
	for i, m := range k.paths {
		b.mk[i] |= m
	}
}

// bulkLoad is phase 3. Keys arrive sorted, so duplicates of a unique index are adjacent. Each
// batch is copied out of the sorter before its unit starts, so a retried unit rewrites the
// same batch.
func (b *builder) bulkLoad(srt *sorter.Sorter) error {
	it, err := srt.Done()
	if err != nil {
		return err
	}
	var (
		prevPrefix []byte
		arena      []byte
		batch      []struct{ k, v, dup int } // end offsets in arena; dup: prefix length or 0
	)
	more := it.Next()
	for more {
		arena, batch = arena[:0], batch[:0]
		for n := 0; more && n < b.opts.BatchSize; n++ {
			key := it.Key()
			_, plen, err := keystring.DecodeRecordIDAtEnd(key)
			if err != nil {
				return err
			}
			dup := 0
			if b.ix.unique && prevPrefix != nil && string(prevPrefix) == string(key[:plen]) {
				dup = plen
			}
			prevPrefix = append(prevPrefix[:0], key[:plen]...)
			arena = append(arena, key...)
			kEnd := len(arena)
			arena = append(arena, it.Value()...)
			batch = append(batch, struct{ k, v, dup int }{kEnd, len(arena), dup})
			more = it.Next()
		}
		if err := it.Err(); err != nil {
			return err
		}
		err := b.indexUnit(func(ru *storage.RecoveryUnit) error {
			start := 0
			for _, e := range batch {
				key := arena[start:e.k]
				if e.dup > 0 {
					if err := ru.Put(b.dups, key[:e.dup], nil); err != nil {
						return err
					}
				}
				if err := ru.Put(b.ix.ident, key, arena[e.k:e.v]); err != nil {
					return err
				}
				start = e.v
			}
			return nil
		})
		if err != nil {
			return err
		}
		b.stats.KeysLoaded += int64(len(batch))
		if err := b.ctx.Err(); err != nil {
			return mongoerr.Newf(mongoerr.IndexBuildAborted, "index build aborted: %v", err)
		}
	}
	return it.Err()
}

// drain makes one sweep over the side-writes table from its beginning, applying and deleting
// records in batches of units, and returns how many it applied. A record committed late by a
// slow writer with a lower sequence number than records already swept is found by the next
// sweep; the final sweep runs with writers blocked, when every record is committed. Sweeping
// forward from the last applied key (rather than from the start for every batch) keeps a
// sweep linear despite the tombstones of drained records.
func (b *builder) drain() (int64, error) {
	var total int64
	var from []byte
	// Bound the sweep by the records allocated when it starts, so that writers producing
	// side writes faster than we apply them cannot keep a sweep going forever.
	var upper [8]byte
	binary.BigEndian.PutUint64(upper[:], b.it.seq.Load()+1)
	type rec struct{ key, val []byte }
	var recs []rec
	var cands [][]byte // KeyString prefixes inserted into a unique index
	split := !b.opts.IndexWriteTimestamp.IsNull()
	for {
		err := b.indexUnit(func(ru *storage.RecoveryUnit) error {
			recs = recs[:0]
			c, err := ru.NewCursor(b.it.side, storage.CursorOptions{Lower: from, Upper: upper[:]})
			if err != nil {
				return err
			}
			// Collect first: the unit's own deletes must not disturb the iteration.
			for ok := c.First(); ok && len(recs) < b.opts.BatchSize; ok = c.Next() {
				recs = append(recs, rec{append([]byte(nil), c.Key()...), append([]byte(nil), c.Value()...)})
			}
			err = c.Err()
			c.Close()
			if err != nil {
				return err
			}
			cands = cands[:0]
			for _, r := range recs {
				prefix, err := b.applySide(ru, r.val)
				if err != nil {
					return err
				}
				if prefix != nil {
					cands = append(cands, prefix)
				}
				if split {
					continue
				}
				if err := ru.Delete(b.it.side, r.key); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && split {
			// The side records carry the writers' (newer) timestamps: a delete at the
			// index write timestamp would be hidden behind them, so they go in a unit
			// of their own at an engine-assigned timestamp.
			err = b.unit(func(ru *storage.RecoveryUnit) error {
				for _, r := range recs {
					if err := ru.Delete(b.it.side, r.key); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err != nil {
			return total, err
		}
		if err := b.checkDupCandidates(cands); err != nil {
			return total, err
		}
		n := len(recs)
		total += int64(n)
		b.stats.SideWrites += int64(n)
		if n < b.opts.BatchSize {
			return total, nil
		}
		// Next batch starts just after the last key applied.
		from = append(append(from[:0], recs[n-1].key...), 0)
		if err := b.ctx.Err(); err != nil {
			return total, mongoerr.Newf(mongoerr.IndexBuildAborted, "index build aborted: %v", err)
		}
	}
}

// applySide applies one side-writes record and returns, for inserts into a unique index, the
// KeyString prefix to check for duplicates once the unit has committed.
func (b *builder) applySide(ru *storage.RecoveryUnit, v []byte) ([]byte, error) {
	op, prefix, full, tb, err := decodeSideRecord(v)
	if err != nil {
		return nil, err
	}
	if op == sideRemove {
		return nil, ru.Delete(b.ix.ident, full)
	}
	if err := ru.Put(b.ix.ident, full, tb); err != nil {
		return nil, err
	}
	if !b.ix.unique {
		return nil, nil
	}
	return prefix, nil
}

// checkDupCandidates records in the duplicate-key table the prefixes that now have several
// index entries. It reads at a fresh snapshot after the drain unit committed (a cursor inside
// the unit would have to merge the unit's own large write buffer on every seek).
func (b *builder) checkDupCandidates(cands [][]byte) error {
	if len(cands) == 0 {
		return nil
	}
	ru := b.coll.e.NewRecoveryUnit()
	defer ru.Close()
	var dups [][]byte
	for _, p := range cands {
		n, err := b.ix.countEntries(ru, p, 2)
		if err != nil {
			return err
		}
		if n > 1 {
			dups = append(dups, p)
		}
	}
	if len(dups) == 0 {
		return nil
	}
	return b.unit(func(ru *storage.RecoveryUnit) error {
		for _, p := range dups {
			if err := ru.Put(b.dups, p, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordIfDup notes prefix in the duplicate-key table when the index holds several entries
// for it (unique indexes only); the final check decides.
func (b *builder) recordIfDup(ru *storage.RecoveryUnit, prefix []byte) error {
	if !b.ix.unique {
		return nil
	}
	n, err := b.ix.countEntries(ru, prefix, 2)
	if err != nil || n < 2 {
		return err
	}
	return ru.Put(b.dups, prefix, nil)
}

// commit is phase 5 of a single-index build, with writers blocked.
func (b *builder) commit() error {
	unblock, err := b.opts.BlockWrites()
	if err != nil {
		return err
	}
	defer unblock()
	b.hook("final")
	if err := b.finish(true); err != nil {
		return err
	}
	if err := b.unit(b.readyIn); err != nil {
		return err
	}
	// Still under the write block: the next writer sees the ready index and no interceptor.
	b.unregister()
	return nil
}

// finish drains the side table to the end and, when checkConstraints is set, re-checks the
// skipped records and recorded duplicates (a primary's commit). Without it (a secondary
// committing on its primary's decision) skipped records are indexed where their keys can be
// generated now and duplicates are kept. Writes must be blocked.
func (b *builder) finish(checkConstraints bool) error {
	if _, err := b.drain(); err != nil {
		return err
	}
	if err := b.recheckSkipped(checkConstraints); err != nil {
		return err
	}
	if !checkConstraints {
		return nil
	}
	return b.recheckDups()
}

// readyIn persists the multikey state the build saw and marks the index ready in ru's unit.
func (b *builder) readyIn(ru *storage.RecoveryUnit) error {
	if b.mkAny {
		if err := b.coll.cat.SetMultikey(ru, b.ns, b.name, b.ix.MultikeyPathsBool(b.mk)); err != nil {
			return err
		}
	}
	return b.coll.cat.SetIndexReady(ru, b.ns, b.name)
}

// recheckSkipped regenerates the keys of records whose key generation failed: records since
// deleted or fixed pass, the others fail the build with their error (or, without
// checkConstraints, stay unindexed: the primary decided the build is valid).
func (b *builder) recheckSkipped(checkConstraints bool) error {
	return b.indexUnit(func(ru *storage.RecoveryUnit) error {
		c, err := ru.NewCursor(b.it.skipped, storage.CursorOptions{})
		if err != nil {
			return err
		}
		var rids []recordid.ID
		for ok := c.First(); ok; ok = c.Next() {
			rid, err := recordid.FromKey(c.Key())
			if err != nil {
				c.Close()
				return mongoerr.Newf(mongoerr.DataCorruptionDetected, "skipped-record table: %v", err)
			}
			rids = append(rids, rid)
		}
		err = c.Err()
		c.Close()
		if err != nil {
			return err
		}
		k := &b.s.k[0]
		for _, rid := range rids {
			doc, found, err := b.coll.rs.Get(ru, rid)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			if err := b.ix.genKeys(b.s, doc, rid, k); err != nil {
				if !checkConstraints && isKeyGenError(err) {
					continue
				}
				return err
			}
			for _, e := range k.list {
				if err := ru.Put(b.ix.ident, k.full(e), k.typeBits(e)); err != nil {
					return err
				}
				if !checkConstraints {
					continue
				}
				if err := b.recordIfDup(ru, k.prefix(e)); err != nil {
					return err
				}
			}
			b.noteMultikey(k)
		}
		return nil
	})
}

// recheckDups fails the build if any recorded duplicate KeyString still has several entries.
func (b *builder) recheckDups() error {
	if !b.ix.unique {
		return nil
	}
	ru := b.coll.e.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(b.dups, storage.CursorOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	for ok := c.First(); ok; ok = c.Next() {
		prefix := c.Key()
		upper := prefixUpper(nil, prefix)
		ic, err := ru.NewCursor(b.ix.ident, storage.CursorOptions{Lower: prefix, Upper: upper})
		if err != nil {
			return err
		}
		n := 0
		var tb []byte
		for ok := ic.First(); ok && n < 2; ok = ic.Next() {
			if n == 0 {
				tb = append([]byte(nil), ic.Value()...)
			}
			n++
		}
		err = ic.Err()
		ic.Close()
		if err != nil {
			return err
		}
		if n > 1 {
			return b.ix.dupKeyError(prefix, tb)
		}
	}
	return c.Err()
}
