package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/shardstate"
)

// _addShard: the shard's half of addShard (MongoDB 7.0's AddShardCommand, add_shard_cmd.cpp):
// the config server sends the shard its identity, which the shard writes to
// admin.system.version with majority write concern; the write makes it shard-aware
// (afterShardIdentityInsert, as MongoDB's ShardServerOpObserver).
func addAddShardIdentity(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_addShard",
		Auth:      service.AuthInternal,
		Handler:   runAddShardIdentity,
		Help:      "Internal command, which is exported by shards. Do not call directly. Adds a new shard to a cluster.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

func runAddShardIdentity(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	st := env.State
	if st.Sharding.Role() != shardstate.RoleShardServer {
		return nil, mongoerr.New(mongoerr.Location50876, "Cannot run addShard on a node started without --shardsvr")
	}
	v, err := cmd.LookupErr("shardIdentity")
	if err != nil {
		return nil, mongoerr.New(mongoerr.Location40414, "BSON field '_addShard.shardIdentity' is missing but a required field")
	}
	fields, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '_addShard.shardIdentity' is the wrong type '%s', expected type 'object'", v.Type)
	}
	// The stored document is the identity with _id "shardIdentity" first, as
	// createShardIdentityUpsertForAddShard writes it.
	b := bsoncore.NewDocumentBuilder().AppendString("_id", shardstate.IdentityID)
	elems, err := fields.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid shardIdentity: %v", err)
	}
	for _, e := range elems {
		if e.Key() != "_id" {
			b.AppendValue(e.Key(), e.Value())
		}
	}
	doc := b.Build()
	want, err := shardstate.ParseIdentity(doc)
	if err != nil {
		return nil, err
	}
	run := internalRunner(st, env.Registry)
	existing, found, err := readShardIdentity(ctx, run)
	if err != nil {
		return nil, err
	}
	if found {
		// A repeated addShard (a retry of the config server) finds its own identity: done.
		// Another cluster's or another name's is refused: a node belongs to one cluster.
		have, err := shardstate.ParseIdentity(existing)
		if err != nil {
			return nil, err
		}
		if have.ShardName != want.ShardName || have.ClusterID != want.ClusterID {
			return nil, mongoerr.Newf(mongoerr.InconsistentShardIdentity,
				"shard identity {shardName: %q, clusterId: %s} does not match the one already in use, {shardName: %q, clusterId: %s}",
				want.ShardName, want.ClusterID.Hex(), have.ShardName, have.ClusterID.Hex())
		}
		if _, aware := st.Sharding.Identity(); !aware {
			if err := initShardIdentity(st, existing); err != nil {
				return nil, err
			}
		}
		return bsoncore.NewDocumentBuilder().Build(), nil
	}
	insert := bsoncore.NewDocumentBuilder().AppendString("insert", "system.version").
		AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(doc).Build()).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	reply, err := run(ctx, "admin", insert)
	if err != nil {
		return nil, err
	}
	if err := configsvr.WriteReplyError(reply); err != nil {
		return nil, err
	}
	if _, aware := st.Sharding.Identity(); !aware {
		// The insert's hook logs rather than fails; make the failure the command's.
		if err := initShardIdentity(st, doc); err != nil {
			return nil, err
		}
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
