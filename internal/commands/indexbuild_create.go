package commands

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/storage"
)

// ddlTwoPhaseBuild is createIndexes on a replica-set member for a non-empty collection
// (spec "Replica Set Index Builds"): it registers the build together with its
// startIndexBuild entry, lets the node's driver commit it once quorum votes are in (see
// indexbuild_coord.go) and waits for the outcome. The build belongs to the node, not to the
// command: a step-down interrupts the command but not the build (whichever node is primary
// later commits it), while killOp or maxTimeMS abort it, as in MongoDB.
func ddlTwoPhaseBuild(ctx context.Context, co *indexBuildsCoord, logger indexBuildLogger, ns string, specs []bsoncore.Document, q commitQuorum) error {
	db := co.db
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s was dropped", ns)
	}
	coll, err := db.Colls.ByUUID(m.UUID)
	if err != nil {
		return err
	}
	id := catalog.NewUUID()
	b, err := index.StartTwoPhaseBuild(co.ctx, coll, id, specs,
		index.BuildOptions{TempDir: db.TempDir, BlockWrites: ddlBlockWrites(db, ns, coll)},
		func(ru *storage.RecoveryUnit, stored []bsoncore.Document) error {
			// The write block holds the RSTL in IX: no step-down between check and entry.
			if err := co.checkPrimary(ns); err != nil {
				return err
			}
			return logger.OnStartIndexBuild(ru, ns, m.UUID, id, stored)
		})
	if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
		// A concurrent createIndexes registered the same index since our check.
		names := make([]string, 0, len(specs))
		for _, s := range specs {
			n, _ := lookup(s, "name").StringValueOK()
			names = append(names, n)
		}
		return ddlWaitForBuilds(ctx, db, ns, names)
	}
	if err != nil {
		return err
	}
	co.ensureDriver(b, &q)
	select {
	case <-b.Done():
		return b.Outcome()
	case <-ctx.Done():
	}
	cause := context.Cause(ctx)
	if c := mongoerr.CodeOf(cause); mongoerr.IsNotPrimaryError(c) || c == mongoerr.InterruptedDueToReplStateChange ||
		mongoerr.IsShutdownError(c) {
		return cause
	}
	co.abort(b, mongoerr.Newf(mongoerr.IndexBuildAborted, "Index build aborted: %s: %v", id, cause))
	return cause
}

// ddlWaitForBuilds waits for the running two-phase builds on ns that build any of names and
// returns the first failure among them.
func ddlWaitForBuilds(ctx context.Context, db *operation.DB, ns string, names []string) error {
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil
	}
	for _, b := range db.Colls.IndexBuilds().ForCollection(m.UUID) {
		if !slices.ContainsFunc(b.Names(), func(n string) bool { return slices.Contains(names, n) }) {
			continue
		}
		select {
		case <-b.Done():
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if err := b.Outcome(); err != nil {
			return err
		}
	}
	return nil
}
