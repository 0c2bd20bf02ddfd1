package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/rangedel"
	"humongo/internal/sharding/shardstate"
)

func addCleanupOrphaned(r *service.Registry) {
	add(r, &service.Command{
		Name:      "cleanupOrphaned",
		Auth:      service.AuthOnCluster(auth.CleanupOrphaned),
		Handler:   runCleanupOrphaned,
		Help:      "no help defined", // Command::help's default: cleanupOrphaned defines none
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

// runCleanupOrphaned is cleanupOrphaned (MongoDB 7.0's cleanup_orphaned_cmd.cpp): on a shard,
// {cleanupOrphaned: ns, startingFromKey?} refreshes ns's filtering metadata and, when the
// collection exists and is sharded, waits until config.rangeDeletions holds no task of its
// UUID (the range deleter has removed every orphaned range recorded for it). startingFromKey
// is only validated against the shard key, as in 7.0. MongoDB answers its argument errors
// without a code (an errmsg command); Humongo gives them InvalidOptions, as the router's
// split does.
func runCleanupOrphaned(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	arg := commandArg(cmd)
	ns, ok := arg.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.InvalidOptions, "wrong type for 'cleanupOrphaned' field, expected string, found %s",
			bsonutil.FormatElement("cleanupOrphaned", arg))
	}
	if catalog.ValidateNS(ns) != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace: %s", ns)
	}
	var startKey bsoncore.Document
	if v := lookup(cmd, "startingFromKey"); v.Type != 0 {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "wrong type for 'startingFromKey' field, expected object, found %s",
				bsonutil.FormatElement("startingFromKey", v))
		}
		startKey = d
	}
	st := env.State
	if _, aware := st.Sharding.Identity(); st.Sharding.Role() != shardstate.RoleShardServer || !aware || st.DB == nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions,
			"server is not part of a sharded cluster or the sharding metadata is not yet initialized.")
	}
	rt, _, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	// onCollectionPlacementVersionMismatch: the metadata is current before it is used.
	m, err := rt.RefreshCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	op := st.DB.NewOp(ctx)
	meta, ok := op.Catalog().ByNS(ns)
	op.Close()
	if !ok {
		st.Logger.Info("cleanupOrphaned skipping waiting for orphaned data cleanup because collection does not exist",
			logv2.C(logv2.Sharding), logv2.ID(4416000), "namespace", ns)
		return bsoncore.NewDocumentBuilder().Build(), nil
	}
	if m == nil || !m.Sharded() {
		st.Logger.Info("cleanupOrphaned skipping waiting for orphaned data cleanup because collection is not sharded",
			logv2.C(logv2.Sharding), logv2.ID(4416001), "namespace", ns)
		return bsoncore.NewDocumentBuilder().Build(), nil
	}
	if len(startKey) > 5 && !m.Table.Pattern().IsShardKey(startKey) {
		return nil, mongoerr.New(mongoerr.OrphanedRangeCleanUpFailed,
			"Could not cleanup orphaned data because start key does not match shard key pattern")
	}
	rd := rangedel.Of(st.DB)
	if rd == nil {
		return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized, "the range deleter is not running on this shard")
	}
	for {
		n, err := rd.Overlapping(ctx, meta.UUID, m.Table.Pattern().GlobalMin(), m.Table.Pattern().GlobalMax())
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return bsoncore.NewDocumentBuilder().Build(), nil
		}
		st.Logger.Info("cleanupOrphaned going to wait for range deletion tasks to complete", logv2.C(logv2.Sharding),
			logv2.ID(4416003), "namespace", ns, "collectionUUID", meta.UUID.String(), "numRemainingDeletionTasks", n)
		if err := rd.WaitForCollection(ctx, meta.UUID); err != nil {
			return nil, err
		}
	}
}
