package configsvr

// removeShard on the config server (MongoDB 7.0's ConfigSvrRemoveShardCommand and
// ShardingCatalogManager::removeShard / _removeShardInTransaction; spec: sharding.md
// "TopologyTime" for the tick). A removal is a sequence of calls: the first marks the shard
// draining in config.shards (state "started"); later calls count what the shard still owns
// (chunks in config.chunks, databases it is primary of in config.databases) and answer
// "ongoing" until both are zero; the call that finds it empty deletes the shard's entry and
// stamps a new topologyTime on another shard's entry in one atomic applyOps (MongoDB's
// transaction), so the set of shards and the topologyTime that announces the change are never
// seen apart ("completed"). The balancer moves the chunks of a draining shard; the operator
// moves or drops its databases (movePrimary).
//
// As in 7.0, several shards may drain at once: the only limit is that some other shard not
// draining remains. Not done here, as MongoDB does: the changelog entries, the cluster
// cardinality parameter, and removing the replica set monitor (humongo's clients are per
// caller and closed with it).

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/sharding/shardstate"
)

// RemoveShardState is RemoveShardProgress's status.
type RemoveShardState int

// The states removeShard answers.
const (
	RemoveShardStarted RemoveShardState = iota
	RemoveShardOngoing
	RemoveShardCompleted
)

func (s RemoveShardState) String() string {
	switch s {
	case RemoveShardStarted:
		return "started"
	case RemoveShardOngoing:
		return "ongoing"
	}
	return "completed"
}

// RemoveShardProgress is one removeShard call's outcome: the shard's id and, while
// ongoing, what it still owns.
type RemoveShardProgress struct {
	State RemoveShardState
	Shard string
	// Chunks, DBs and JumboChunks are the remaining counts (ongoing only).
	Chunks, DBs, JumboChunks int64
	// DBsToMove are the databases whose primary the shard still is (started, ongoing).
	DBsToMove []string
}

// Reply is _configsvrRemoveShard's reply (the fields the router passes through).
func (p RemoveShardProgress) Reply() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	dbInfo := func() {
		ab := bsoncore.NewArrayBuilder()
		for _, db := range p.DBsToMove {
			ab.AppendString(db)
		}
		b.AppendString("note", "you need to drop or movePrimary these databases").AppendArray("dbsToMove", ab.Build())
	}
	switch p.State {
	case RemoveShardStarted:
		b.AppendString("msg", "draining started successfully").AppendString("state", "started").AppendString("shard", p.Shard)
		dbInfo()
	case RemoveShardOngoing:
		b.AppendString("msg", "draining ongoing").AppendString("state", "ongoing").
			AppendDocument("remaining", bsoncore.NewDocumentBuilder().AppendInt64("chunks", p.Chunks).
				AppendInt64("dbs", p.DBs).AppendInt64("jumboChunks", p.JumboChunks).Build())
		dbInfo()
	default:
		b.AppendString("msg", "removeshard completed successfully").AppendString("state", "completed").AppendString("shard", p.Shard)
	}
	return b.Build()
}

// ResolveShard finds the config.shards entry named by idOrURL as the shard registry's
// getShard does: its id, its connection string, its replica set name or one of its hosts.
func (m *Manager) ResolveShard(ctx context.Context, idOrURL string) (shardregistry.Shard, error) {
	shards, err := m.shards(ctx)
	if err != nil {
		return shardregistry.Shard{}, err
	}
	for _, s := range shards {
		if s.ID == idOrURL || s.Host == idOrURL || (s.SetName() != "" && s.SetName() == idOrURL) || slices.Contains(s.Hosts(), idOrURL) {
			return s, nil
		}
	}
	return shardregistry.Shard{}, mongoerr.Newf(mongoerr.ShardNotFound, "Shard %s not found", idOrURL)
}

// RemoveShard is one step of removing the shard named idOrURL (ConfigSvrRemoveShardCommand
// with ShardingCatalogManager::removeShard).
func (m *Manager) RemoveShard(ctx context.Context, idOrURL string) (RemoveShardProgress, error) {
	if idOrURL == shardstate.ConfigServerShardID {
		return RemoveShardProgress{}, mongoerr.New(mongoerr.IllegalOperation,
			"Cannot remove the config server as a shard using removeShard. To transition the config shard to a dedicated config server use the transitionToDedicatedConfigServer command.")
	}
	shard, err := m.ResolveShard(ctx, idOrURL)
	if err != nil {
		return RemoveShardProgress{}, err
	}
	p, err := m.removeShard(ctx, shard.ID)
	if err != nil {
		return p, err
	}
	p.Shard = shard.ID
	if p.State != RemoveShardCompleted {
		dbs, err := m.find(ctx, "databases", str("primary", shard.ID), 0)
		if err != nil {
			return p, err
		}
		for _, d := range dbs {
			if name, _ := d.Lookup("_id").StringValueOK(); name != "" && name != "local" {
				p.DBsToMove = append(p.DBsToMove, name)
			}
		}
	}
	return p, nil
}

func (m *Manager) removeShard(ctx context.Context, name string) (RemoveShardProgress, error) {
	m.membership.Lock()
	locked := true
	defer func() {
		if locked {
			m.membership.Unlock()
		}
	}()
	docs, err := m.find(ctx, "shards", str("_id", name), 1)
	if err != nil {
		return RemoveShardProgress{}, err
	}
	if len(docs) == 0 {
		return RemoveShardProgress{}, mongoerr.Newf(mongoerr.ShardNotFound, "Shard %s does not exist", name)
	}
	shard, err := shardregistry.ParseShard(docs[0])
	if err != nil {
		return RemoveShardProgress{}, err
	}
	others, err := m.count(ctx, "shards", bsoncore.NewDocumentBuilder().
		AppendDocument("_id", bsoncore.NewDocumentBuilder().AppendString("$ne", name).Build()).
		AppendDocument("draining", bsoncore.NewDocumentBuilder().AppendBoolean("$ne", true).Build()).Build())
	if err != nil {
		return RemoveShardProgress{}, err
	}
	if others == 0 {
		return RemoveShardProgress{}, mongoerr.New(mongoerr.IllegalOperation, "Operation not allowed because it would remove the last shard")
	}
	for _, zone := range shard.Tags {
		inUse, err := m.shardRequiredByZone(ctx, name, zone)
		if err != nil {
			return RemoveShardProgress{}, err
		}
		if inUse {
			return RemoveShardProgress{}, mongoerr.Newf(mongoerr.ZoneStillInUse,
				"Operation not allowed because it would remove the only shard for zone %s which has a chunk range is associated with it", zone)
		}
	}
	if !shard.Draining {
		n, err := m.update(ctx, "shards", str("_id", name), bsoncore.NewDocumentBuilder().
			AppendDocument("$set", bsoncore.NewDocumentBuilder().AppendBoolean("draining", true).Build()).Build(), false)
		if err != nil {
			return RemoveShardProgress{}, fmt.Errorf("error starting removeShard: %w", err)
		}
		if n == 0 {
			return RemoveShardProgress{}, mongoerr.Newf(mongoerr.ShardNotFound, "Shard %s does not exist", name)
		}
		return RemoveShardProgress{State: RemoveShardStarted}, nil
	}
	// Draining already: count what is left without the lock (MongoDB releases it too).
	m.membership.Unlock()
	locked = false
	chunks, err := m.count(ctx, "chunks", str("shard", name))
	if err != nil {
		return RemoveShardProgress{}, err
	}
	dbs, err := m.count(ctx, "databases", str("primary", name))
	if err != nil {
		return RemoveShardProgress{}, err
	}
	jumbo, err := m.count(ctx, "chunks", bsoncore.NewDocumentBuilder().AppendString("shard", name).AppendBoolean("jumbo", true).Build())
	if err != nil {
		return RemoveShardProgress{}, err
	}
	if chunks > 0 || dbs > 0 {
		return RemoveShardProgress{State: RemoveShardOngoing, Chunks: chunks, DBs: dbs, JumboChunks: jumbo}, nil
	}

	m.membership.Lock()
	locked = true
	// The shard may have been removed by a concurrent call meanwhile.
	if docs, err := m.find(ctx, "shards", str("_id", name), 1); err != nil {
		return RemoveShardProgress{}, err
	} else if len(docs) == 0 {
		return RemoveShardProgress{State: RemoveShardCompleted}, nil
	}
	control, err := m.find(ctx, "shards", bsoncore.NewDocumentBuilder().
		AppendDocument("_id", bsoncore.NewDocumentBuilder().AppendString("$ne", name).Build()).Build(), 1)
	if err != nil {
		return RemoveShardProgress{}, err
	}
	if len(control) == 0 {
		return RemoveShardProgress{}, mongoerr.New(mongoerr.Location4740601, "unable to find a controlShard to update during removeShard")
	}
	controlID, _ := control[0].Lookup("_id").StringValueOK()
	ts := m.Now()
	if err := m.removeShardInTransaction(ctx, name, controlID, ts); err != nil {
		return RemoveShardProgress{}, err
	}
	if m.TopologyChanged != nil {
		m.TopologyChanged(ts)
	}
	return RemoveShardProgress{State: RemoveShardCompleted}, nil
}

// removeShardInTransaction is _removeShardInTransaction: the shard's entry deleted and the
// control shard's topologyTime set, atomically (one applyOps), majority committed.
func (m *Manager) removeShardInTransaction(ctx context.Context, name, control string, ts bson.Timestamp) error {
	del := bsoncore.NewDocumentBuilder().AppendString("op", "d").AppendString("ns", "config.shards").
		AppendDocument("o", str("_id", name)).Build()
	diff := bsoncore.NewDocumentBuilder().AppendInt32("$v", 2).AppendDocument("diff", bsoncore.NewDocumentBuilder().
		AppendDocument("u", bsoncore.NewDocumentBuilder().AppendTimestamp("topologyTime", ts.T, ts.I).Build()).Build()).Build()
	upd := bsoncore.NewDocumentBuilder().AppendString("op", "u").AppendString("ns", "config.shards").AppendBoolean("b", false).
		AppendDocument("o", diff).AppendDocument("o2", str("_id", control)).Build()
	cmd := bsoncore.NewDocumentBuilder().
		AppendArray("applyOps", bsoncore.NewArrayBuilder().AppendDocument(del).AppendDocument(upd).Build()).
		AppendBoolean("alwaysUpsert", false).AppendDocument("writeConcern", majority()).Build()
	reply, err := m.Run(ctx, "admin", cmd)
	if err != nil {
		return fmt.Errorf("remove shard %s from config.shards: %w", name, err)
	}
	return WriteReplyError(reply)
}

// count runs a count of config.<coll> matching query on this node.
func (m *Manager) count(ctx context.Context, coll string, query bsoncore.Document) (int64, error) {
	reply, err := m.Run(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("count", coll).AppendDocument("query", query).Build())
	if err != nil {
		return 0, fmt.Errorf("count config.%s: %w", coll, err)
	}
	n, ok := reply.Lookup("n").AsInt64OK()
	if !ok {
		return 0, mongoerr.Newf(mongoerr.NoSuchKey, "count of config.%s answered without n: %s", coll, reply)
	}
	return n, nil
}
