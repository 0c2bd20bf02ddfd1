package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/migration"
	"humongo/internal/sharding/routing"
)

func configsvrMoveRangeCommand() *service.Command {
	return &service.Command{Name: "_configsvrMoveRange", Auth: service.AuthInternal, Handler: runConfigsvrMoveRange, AdminOnly: true,
		Secondary: service.SecondaryNever,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Requests the balancer to move a range of a sharded collection."}
}

func configsvrCommitChunkMigrationCommand() *service.Command {
	return &service.Command{Name: "_configsvrCommitChunkMigration", Auth: service.AuthInternal, Handler: runConfigsvrCommitChunkMigration, AdminOnly: true,
		Secondary: service.SecondaryNever, Writes: true,
		Help: "should not be calling this directly"}
}

// runConfigsvrMoveRange is the config server's _configsvrMoveRange ({_configsvrMoveRange:
// ns, toShard, min, max?, waitForDelete, forceJumbo, secondaryThrottle}): it finds the
// chunk containing min and its owner, and sends _shardsvrMoveRange to the owner's primary
// with the collection's epoch, timestamp and the chunk size that applies.
func runConfigsvrMoveRange(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrMoveRange"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	req, err := migration.ParseMoveRangeBase(name, cmd)
	if err != nil {
		return nil, err
	}
	s := shardingDDLOf(env)
	remote, err := s.coord.Remote()
	if err != nil {
		return nil, err
	}
	if _, err := remote.Shards.Lookup(ctx, req.ToShard); err != nil {
		return nil, mongoerr.Newf(mongoerr.ShardNotFound, "Could not find shard %s", req.ToShard)
	}
	t, err := s.committer.MoveRangeTarget(ctx, req.NS, req.Min)
	if err != nil {
		return nil, err
	}
	req.FromShard, req.Epoch, req.CollectionTimestamp = t.Chunk.Shard, t.Gen.Epoch, t.Gen.Timestamp
	req.MaxChunkSizeBytes = t.MaxChunkSizeBytes
	rs, err := remote.Shard(ctx, t.Chunk.Shard)
	if err != nil {
		return nil, err
	}
	if _, err := ddl.Run(ctx, rs, "admin", req.Command()); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// runConfigsvrCommitChunkMigration commits a migration ({_configsvrCommitChunkMigration: ns,
// fromShard, toShard, migratedChunk: {min, max, lastmod}, fromShardCollectionVersion,
// validAfter}) and answers, once majority committed, {shardVersion, collectionVersion}.
func runConfigsvrCommitChunkMigration(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrCommitChunkMigration"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	var req configsvr.MigrationRequest
	var ok bool
	if req.NS, ok = cmd.Index(0).Value().StringValueOK(); !ok || req.NS == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	required := func(field string, t bsoncore.Type) (bsoncore.Value, error) { return requiredField(cmd, name, field, t) }
	v, err := required("fromShard", bsoncore.TypeString)
	if err != nil {
		return nil, err
	}
	req.FromShard = v.StringValue()
	if v, err = required("toShard", bsoncore.TypeString); err != nil {
		return nil, err
	}
	req.ToShard = v.StringValue()
	if v, err = required("migratedChunk", bsoncore.TypeEmbeddedDocument); err != nil {
		return nil, err
	}
	mc := v.Document()
	if req.Min, ok = mc.Lookup("min").DocumentOK(); !ok {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.migratedChunk.min' is missing but a required field", name)
	}
	if req.Max, ok = mc.Lookup("max").DocumentOK(); !ok {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.migratedChunk.max' is missing but a required field", name)
	}
	if v, err = required("fromShardCollectionVersion", bsoncore.TypeEmbeddedDocument); err != nil {
		return nil, err
	}
	cv, err := routing.ParseShardVersion(v)
	if err != nil {
		return nil, err
	}
	req.Gen = cv.Generation
	if t, i, ok := mc.Lookup("lastmod").TimestampOK(); ok {
		req.Version = routing.ChunkVersion{Major: t, Minor: i, Generation: cv.Generation}
		req.HasVersion = true
	}
	if v, err = required("validAfter", bsoncore.TypeTimestamp); err != nil {
		return nil, err
	}
	t, i := v.Timestamp()
	req.ValidAfter = bson.Timestamp{T: t, I: i}
	vs, err := shardingDDLOf(env).committer.CommitMigration(ctx, req)
	if err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, versionsReply(vs))
}

func configsvrEnsureChunkVersionCommand() *service.Command {
	return &service.Command{Name: "_configsvrEnsureChunkVersionIsGreaterThan", Auth: service.AuthInternal, Handler: runConfigsvrEnsureChunkVersion, AdminOnly: true,
		Secondary: service.SecondaryNever, Writes: true,
		Help: "Internal command, which is exported by the sharding config server. Do not call directly."}
}

// runConfigsvrEnsureChunkVersion fences off a migration's late commit
// ({_configsvrEnsureChunkVersionIsGreaterThan: 1, minKey, maxKey, version, collectionUUID,
// nss}; configsvr.Committer.EnsureChunkVersionIsGreaterThan) and answers once majority
// committed.
func runConfigsvrEnsureChunkVersion(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrEnsureChunkVersionIsGreaterThan"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	required := func(field string, t bsoncore.Type) (bsoncore.Value, error) { return requiredField(cmd, name, field, t) }
	minV, err := required("minKey", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	maxV, err := required("maxKey", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	vv, err := required("version", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	version, err := routing.ParseShardVersion(vv)
	if err != nil {
		return nil, err
	}
	uv, err := required("collectionUUID", bsoncore.TypeBinary)
	if err != nil {
		return nil, err
	}
	sub, data := uv.Binary()
	if sub != 4 || len(data) != 16 {
		return nil, mongoerr.Newf(mongoerr.InvalidUUID, "BSON field '%s.collectionUUID' is not a UUID", name)
	}
	nv, err := required("nss", bsoncore.TypeString)
	if err != nil {
		return nil, err
	}
	var uuid [16]byte
	copy(uuid[:], data)
	if err := shardingDDLOf(env).committer.EnsureChunkVersionIsGreaterThan(ctx, nv.StringValue(), uuid, minV.Document(), maxV.Document(), version); err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, emptyDoc)
}

func configsvrSetAllowMigrationsCommand() *service.Command {
	return &service.Command{Name: "_configsvrSetAllowMigrations", Auth: service.AuthInternal, Handler: runConfigsvrSetAllowMigrations, AdminOnly: true,
		Secondary: service.SecondaryNever, Writes: true,
		Help: "Internal command, which is exported by the sharding config server. Do not call directly. Sets the allowMigrations flag on the specified collection."}
}

// runConfigsvrSetAllowMigrations ({_configsvrSetAllowMigrations: ns, allowMigrations: bool,
// collectionUUID?}) stops or resumes a sharded collection's migrations: DDL coordinators
// stop them while they work, setAllowMigrations lets an administrator do it. Answers once
// majority committed.
func runConfigsvrSetAllowMigrations(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrSetAllowMigrations"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	ns, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || ns == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	v, err := requiredField(cmd, name, "allowMigrations", bsoncore.TypeBoolean)
	if err != nil {
		return nil, err
	}
	var uuid *[16]byte
	if u := lookup(cmd, "collectionUUID"); u.Type != 0 {
		sub, data, ok := u.BinaryOK()
		if !ok || sub != 4 || len(data) != 16 {
			return nil, typeMismatch(name, "collectionUUID", u.Type, "uuid")
		}
		uuid = new([16]byte)
		copy(uuid[:], data)
	}
	if err := shardingDDLOf(env).committer.SetAllowMigrations(ctx, ns, uuid, v.Boolean()); err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, emptyDoc)
}

func configsvrCommitRefineCommand() *service.Command {
	return &service.Command{Name: "_configsvrCommitRefineCollectionShardKey", Auth: service.AuthInternal, Handler: runConfigsvrCommitRefine, AdminOnly: true,
		Secondary: service.SecondaryNever, Writes: true,
		Help: "Internal command, which is exported by the sharding config server. Do not call directly. Adds a suffix to the shard key of an existing collection ('refines the shard key')."}
}

// runConfigsvrCommitRefine ({_configsvrCommitRefineCollectionShardKey: ns, key,
// collectionUUID, epoch, timestamp}) commits a refined shard key (configsvr.RefineShardKey)
// and answers once majority committed.
func runConfigsvrCommitRefine(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrCommitRefineCollectionShardKey"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	var req configsvr.RefineRequest
	var ok bool
	if req.NS, ok = cmd.Index(0).Value().StringValueOK(); !ok || req.NS == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid namespace specified for request")
	}
	v, err := requiredField(cmd, name, "key", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	req.Key = v.Document()
	if v, err = requiredField(cmd, name, "collectionUUID", bsoncore.TypeBinary); err != nil {
		return nil, err
	}
	sub, data, _ := v.BinaryOK()
	if sub != 4 || len(data) != 16 {
		return nil, typeMismatch(name, "collectionUUID", v.Type, "uuid")
	}
	copy(req.UUID[:], data)
	if v, err = requiredField(cmd, name, "epoch", bsoncore.TypeObjectID); err != nil {
		return nil, err
	}
	req.Gen.Epoch = v.ObjectID()
	if v, err = requiredField(cmd, name, "timestamp", bsoncore.TypeTimestamp); err != nil {
		return nil, err
	}
	t, i := v.Timestamp()
	req.Gen.Timestamp = bson.Timestamp{T: t, I: i}
	if err := shardingDDLOf(env).committer.RefineShardKey(ctx, req); err != nil {
		return nil, err
	}
	return waitMajority(ctx, env, emptyDoc)
}
