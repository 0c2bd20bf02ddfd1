package index

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// RestartUnfinishedBuilds restarts, from scratch, every index build that a crash or shutdown
// interrupted (spec: startup "unfinished builds"; a standalone restarts them rather than
// resuming): each index that the catalog lists as not ready has its metadata dropped (its
// table goes through the two-phase drop; the build's temporary tables were already dropped by
// the catalog's startup reconciliation) and is built again with Build and the same spec and
// build UUID. Such an index received no writes since the restart, so it cannot be kept.
//
// Call it at startup, after the catalog opened and before any client can write or start
// another build. A build that fails on the data (DuplicateKey, key-generation errors) is
// logged and left aborted, as a failed createIndexes would be; other errors stop the restart
// and are returned. opts applies to every build (BuildUUID is ignored; Log names the logger).
func RestartUnfinishedBuilds(ctx context.Context, cs *Collections, opts BuildOptions) error {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("c", "INDEX")
	type unfinished struct {
		uuid catalog.UUID
		ns   string
		name string
		spec bsoncore.Document
		bid  *catalog.UUID
	}
	var todo []unfinished
	reg := cs.IndexBuilds()
	for _, m := range cs.cat.Latest().All() {
		for i := range m.Indexes {
			im := &m.Indexes[i]
			if im.Ready {
				continue
			}
			if im.BuildUUID != nil {
				if _, running := reg.Get(*im.BuildUUID); running {
					// A two-phase build this node is running (started by startup
					// recovery's replay of startIndexBuild): it waits for its commit.
					continue
				}
			}
			u := unfinished{uuid: m.UUID, ns: m.NS, name: im.Name, spec: slices.Clone(im.Spec)}
			if im.BuildUUID != nil {
				b := *im.BuildUUID
				u.bid = &b
			}
			todo = append(todo, u)
		}
	}
	for _, u := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		bid := "none"
		if u.bid != nil {
			bid = u.bid.String()
		}
		log.Info("restarting unfinished index build", "ns", u.ns, "index", u.name, "buildUUID", bid,
			"spec", u.spec.String())
		coll, err := cs.ByUUID(u.uuid)
		if err != nil {
			return fmt.Errorf("restarting index build %s on %s: %w", u.name, u.ns, err)
		}
		// Drop the stale metadata in its own unit: Build registers the index again (not ready)
		// in a unit of its own. A crash in between loses the index, which was never ready.
		ru := cs.e.NewRecoveryUnit()
		err = storage.WriteConflictRetry(ctx, "restartIndexBuild", func() error {
			defer ru.AbandonSnapshot()
			w := ru.BeginUnitOfWork()
			defer w.End()
			if err := cs.cat.DropIndex(ru, u.ns, u.name); err != nil {
				return err
			}
			return w.Commit()
		})
		ru.Close()
		if err != nil {
			return fmt.Errorf("restarting index build %s on %s: dropping the unfinished index: %w", u.ns, u.name, err)
		}
		bopts := opts
		bopts.BuildUUID = u.bid
		_, stats, err := Build(ctx, coll, u.spec, bopts)
		switch {
		case err == nil:
			log.Info("restarted index build finished", "ns", u.ns, "index", u.name, "buildUUID", bid,
				"scanned", stats.Scanned, "keys", stats.KeysLoaded)
		case isDataError(err):
			// The build cleaned up after itself; the index is gone, as after a failed
			// createIndexes.
			log.Warn("restarted index build failed; the index was dropped", "ns", u.ns, "index", u.name,
				"buildUUID", bid, "error", err.Error())
		default:
			return fmt.Errorf("restarting index build %s on %s: %w", u.name, u.ns, err)
		}
	}
	return nil
}

// isDataError reports build failures caused by the collection's contents or the spec, which
// abort that build only.
func isDataError(err error) bool {
	if isKeyGenError(err) {
		return true
	}
	switch mongoerr.CodeOf(err) {
	case mongoerr.DuplicateKey, mongoerr.CannotCreateIndex, mongoerr.BadValue, mongoerr.InvalidOptions,
		mongoerr.IndexOptionsConflict, mongoerr.IndexKeySpecsConflict, mongoerr.FailedToParse:
		return true
	}
	return false
}
