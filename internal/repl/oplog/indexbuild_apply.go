package oplog

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// Application of two-phase index build entries (spec execution.md "Replica Set Index
// Builds"; MongoDB's IndexBuildsCoordinator::applyStartIndexBuild / applyCommitIndexBuild /
// applyAbortIndexBuild):
//
//   - startIndexBuild registers the build at the entry's timestamp (indexes not ready) and
//     starts its collection scan in the background (index.StartTwoPhaseBuild): the applier
//     goes on with the next batch while the build runs; later writes reach the build's side
//     tables through the write path's interceptors.
//   - commitIndexBuild waits for that build's scan, drains it and marks the indexes ready in
//     a unit at the entry's timestamp. Constraints are not re-checked: the primary decided.
//     A build this node does not know (the entry follows an initial sync, or a restart
//     already rebuilt or dropped the registration) is built then, synchronously, and
//     committed at the entry's timestamp.
//   - abortIndexBuild aborts the build (dropping its indexes at the entry's timestamp), or
//     drops the indexes it names when the build is not running here.
//
// Command entries are applied alone in their batch, so no applier writer runs concurrently
// with a registration or a commit, which is what the builds' write blocking needs.

// indexBuildEntry is a parsed start/commit/abortIndexBuild o field.
type indexBuildEntry struct {
	ns    string
	build catalog.UUID
	specs []bsoncore.Document
	names []string
	cause bsoncore.Document
}

func parseIndexBuildEntry(e *Entry, kind string) (*indexBuildEntry, error) {
	db, _ := catalog.SplitNS(e.NS)
	coll, ok := e.O.Lookup(kind).StringValueOK()
	if !ok || coll == "" {
		return nil, mongoerr.Newf(mongoerr.BadValue, "%s entry without a collection name", kind)
	}
	out := &indexBuildEntry{ns: db + "." + coll}
	st, b, ok := e.O.Lookup("indexBuildUUID").BinaryOK()
	if !ok || st != 4 || len(b) != 16 {
		return nil, mongoerr.Newf(mongoerr.BadValue, "%s entry without an indexBuildUUID", kind)
	}
	copy(out.build[:], b)
	arr, ok := e.O.Lookup("indexes").ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "%s entry without indexes", kind)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "%s entry indexes: %v", kind, err)
	}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.BadValue, "%s entry index is not an object", kind)
		}
		name, ok := d.Lookup("name").StringValueOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.BadValue, "%s entry index without a name", kind)
		}
		out.specs = append(out.specs, d)
		out.names = append(out.names, name)
	}
	if len(out.specs) == 0 {
		return nil, mongoerr.Newf(mongoerr.BadValue, "%s entry without indexes", kind)
	}
	out.cause, _ = e.O.Lookup("cause").DocumentOK()
	return out, nil
}

// buildCollection resolves the collection of an index build entry.
func (a *Applier) buildCollection(e *Entry, ib *indexBuildEntry) (*catalog.CollectionMeta, bool) {
	return a.collection(&Entry{HasUI: e.HasUI, UI: e.UI, NS: ib.ns})
}

func (a *Applier) applyStartIndexBuild(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, mode Mode) error {
	ib, err := parseIndexBuildEntry(e, "startIndexBuild")
	if err != nil {
		return err
	}
	if ru.InUnitOfWork() {
		return mongoerr.New(mongoerr.IllegalOperation, "applying startIndexBuild needs its own unit (index build)")
	}
	reg := a.colls.IndexBuilds()
	if _, running := reg.Get(ib.build); running {
		return nil // already applied
	}
	m, ok := a.buildCollection(e, ib)
	if !ok {
		if mode.tolerant() {
			return nil
		}
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "applying startIndexBuild: collection %s not found", ib.ns)
	}
	// Indexes already present (cloned by initial sync, or registered before a restart and
	// since rebuilt) are not built again; the others are.
	var specs []bsoncore.Document
	for i, s := range ib.specs {
		if _, exists := m.Index(ib.names[i]); !exists {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		return nil
	}
	coll, err := a.colls.ByUUID(m.UUID)
	if err != nil {
		return err
	}
	ts := e.OpTime.TS
	// The build outlives this batch: its scan is bounded by the registry (Abort, Shutdown),
	// not by the applier's context.
	_, err = index.StartTwoPhaseBuild(context.WithoutCancel(ctx), coll, ib.build, specs,
		index.BuildOptions{TempDir: a.tempDir, IndexWriteTimestamp: ts},
		func(ru *storage.RecoveryUnit, _ []bsoncore.Document) error { return ru.SetTimestamp(ts) })
	return err
}

func (a *Applier) applyCommitIndexBuild(ctx context.Context, ru *storage.RecoveryUnit, e *Entry, mode Mode) error {
	ib, err := parseIndexBuildEntry(e, "commitIndexBuild")
	if err != nil {
		return err
	}
	if ru.InUnitOfWork() {
		return mongoerr.New(mongoerr.IllegalOperation, "applying commitIndexBuild needs its own unit (index build)")
	}
	ts := e.OpTime.TS
	stamp := func(ru *storage.RecoveryUnit) error { return ru.SetTimestamp(ts) }
	if b, running := a.colls.IndexBuilds().Get(ib.build); running {
		err := b.Commit(ctx, false, stamp)
		if errors.Is(err, index.ErrBuildFinished) {
			if b.Outcome() == nil {
				return nil
			}
			// Aborted here meanwhile (a dropIndexes on this node cannot happen on a
			// secondary): build it from scratch as for an unknown build.
		} else {
			return err
		}
	}
	m, ok := a.buildCollection(e, ib)
	if !ok {
		if mode.tolerant() {
			return nil
		}
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "applying commitIndexBuild: collection %s not found", ib.ns)
	}
	// An unknown build: drop leftovers of it that are not ready (a registration a restart
	// did not rebuild), then build what is missing and commit it at the entry's timestamp.
	var specs []bsoncore.Document
	var stale []string
	for i, s := range ib.specs {
		ix, exists := m.Index(ib.names[i])
		switch {
		case !exists:
			specs = append(specs, s)
		case !ix.Ready:
			stale = append(stale, ix.Name)
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		return nil
	}
	if len(stale) > 0 {
		err := a.inUnit(ctx, ru, ts, func() error {
			for _, n := range stale {
				if err := a.cat.DropIndex(ru, m.NS, n); err != nil && !mongoerr.Is(err, mongoerr.IndexNotFound) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	coll, err := a.colls.ByUUID(m.UUID)
	if err != nil {
		return err
	}
	b, err := index.StartTwoPhaseBuild(context.WithoutCancel(ctx), coll, ib.build, specs,
		index.BuildOptions{TempDir: a.tempDir, IndexWriteTimestamp: ts}, func(ru *storage.RecoveryUnit, _ []bsoncore.Document) error {
			// Registered at the commit's timestamp too: the catalog has no version between
			// "absent" and "ready" that a reader at an older timestamp could see.
			return ru.SetTimestamp(ts)
		})
	if err != nil {
		return err
	}
	if err := b.Commit(ctx, false, stamp); err != nil {
		_ = b.Abort(nil, err)
		return err
	}
	return nil
}

func (a *Applier) applyAbortIndexBuild(ctx context.Context, ru *storage.RecoveryUnit, e *Entry) error {
	ib, err := parseIndexBuildEntry(e, "abortIndexBuild")
	if err != nil {
		return err
	}
	if ru.InUnitOfWork() {
		return mongoerr.New(mongoerr.IllegalOperation, "applying abortIndexBuild needs its own unit (index build)")
	}
	ts := e.OpTime.TS
	cause := mongoerr.New(mongoerr.IndexBuildAborted, "index build aborted by the primary")
	if ib.cause != nil {
		if c, ok := ib.cause.Lookup("code").AsInt64OK(); ok {
			msg, _ := ib.cause.Lookup("errmsg").StringValueOK()
			cause = mongoerr.New(mongoerr.Code(c), msg)
		}
	}
	if b, running := a.colls.IndexBuilds().Get(ib.build); running {
		err := b.Abort(func(ru *storage.RecoveryUnit) error { return ru.SetTimestamp(ts) }, cause)
		if !errors.Is(err, index.ErrBuildFinished) {
			return err
		}
	}
	// Not running here: drop whatever not-ready index of the build is left.
	return a.inUnit(ctx, ru, ts, func() error {
		m, ok := a.buildCollection(e, ib)
		if !ok {
			return nil
		}
		for _, n := range ib.names {
			// A ready one too: a restart rebuilds unfinished builds to ready on its own,
			// and the primary never committed this one.
			if _, exists := m.Index(n); !exists {
				continue
			}
			if err := a.cat.DropIndex(ru, m.NS, n); err != nil && !mongoerr.Is(err, mongoerr.IndexNotFound) {
				return err
			}
		}
		return nil
	})
}
