package commands

import (
	"context"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func configsvrCommitMergeAllChunksOnShardCommand() *service.Command {
	return &service.Command{
		Name:      "_configsvrCommitMergeAllChunksOnShard",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrCommitMergeAllChunksOnShard,
		Help:      "Internal command, which is sent by a shard or a router to the sharding config server. Do not call directly. Merges all mergeable chunks of a collection on a shard.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	}
}

// runConfigsvrCommitMergeAllChunksOnShard merges every run of contiguous mergeable chunks of
// a shard ({_configsvrCommitMergeAllChunksOnShard: ns, shard, maxNumberOfChunksToMerge};
// merge_chunk_request.idl) and answers, once majority committed, the shard's version
// (ConfigSvrMergeResponse) and the collection's, as the other chunk commits here do.
func runConfigsvrCommitMergeAllChunksOnShard(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrCommitMergeAllChunksOnShard"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || ns == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	sv := lookup(cmd, "shard")
	if sv.Type == 0 {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.shard' is missing but a required field", name)
	}
	shard, ok := sv.StringValueOK()
	if !ok {
		return nil, typeMismatch(name, "shard", sv.Type, "string")
	}
	if shard == "" {
		return nil, mongoerr.New(mongoerr.NoSuchKey, "ShardId cannot be empty")
	}
	max := int64(math.MaxInt32)
	if v := lookup(cmd, "maxNumberOfChunksToMerge"); v.Type != 0 {
		n, ok := v.AsInt64OK()
		if !ok {
			return nil, typeMismatch(name, "maxNumberOfChunksToMerge", v.Type, "int")
		}
		max = n
	}
	res, err := shardingDDLOf(env).committer.CommitMergeAllChunksOnShard(ctx, ns, shard, int(max), oldestSnapshotTimestamp(env.State))
	if err != nil {
		return nil, err
	}
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = res.Shard.AppendShardVersion(b, "shardVersion")
	b = res.Collection.AppendShardVersion(b, "collectionVersion")
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return waitMajority(ctx, env, b)
}

// oldestSnapshotTimestamp is getOldestTimestampSupportedForSnapshotHistory: the cluster
// time minus minSnapshotHistoryWindowInSeconds (chunks placed since then still serve
// snapshot reads by their history and are not merged).
func oldestSnapshotTimestamp(st *service.State) bson.Timestamp {
	now := st.Concern.Clock.ClusterTime().Secs()
	if now == 0 {
		now = uint32(time.Now().Unix())
	}
	window := uint32(st.Params.Int("minSnapshotHistoryWindowInSeconds"))
	if window >= now {
		return bson.Timestamp{T: 0, I: 1}
	}
	return bson.Timestamp{T: now - window, I: 0}
}
