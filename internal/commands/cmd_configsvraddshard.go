package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/shardstate"
)

// _configsvrAddShard: the config server's half of addShard (MongoDB's
// ConfigSvrAddShardCommand); the logic is configsvr.Manager.AddShard.
func addConfigsvrAddShard(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrAddShard",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrAddShard,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Validates and adds a new shard to the cluster.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

func runConfigsvrAddShard(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	req, err := configsvr.ParseAddShard(cmd)
	if err != nil {
		return nil, err
	}
	name, err := m.AddShard(ctx, req)
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendString("shardAdded", name).Build(), nil
}

// requireMajorityWriteConcern is CommandHelpers::uassertCommandRunWithMajority: the config
// server's catalog commands are only run with w: "majority".
func requireMajorityWriteConcern(env *service.Env, cmd bsoncore.Document) error {
	wc, ok := lookup(cmd, "writeConcern").DocumentOK()
	if w, isStr := wc.Lookup("w").StringValueOK(); !ok || !isStr || w != "majority" {
		return mongoerr.Newf(mongoerr.InvalidOptions, "%s must be called with majority writeConcern, got %s", env.Command.Name, cmd)
	}
	return nil
}

type configsvrManagerKey struct{}

// configsvrManager returns this config server's catalog manager (built on first use); on any
// other node the command is IllegalOperation, as in MongoDB.
func configsvrManager(env *service.Env) (*configsvr.Manager, error) {
	st := env.State
	if st.Sharding.Role() != shardstate.RoleConfigServer || st.Repl == nil {
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "%s can only be run on config servers", env.Command.Name)
	}
	return st.Decorate(configsvrManagerKey{}, func() any {
		rc := st.Repl
		return &configsvr.Manager{
			Run:              internalRunner(st, env.Registry),
			Client:           shardClientOptions(st, "humongod-configsvr", 0),
			ConnectionString: func() string { return setConnectionString(rc) },
			// tickClusterTime(1): a cluster time after everything this node has written or
			// heard of.
			Now: func() bson.Timestamp {
				clock := &st.Concern.Clock
				clock.AdvanceCluster(rc.LastApplied().TS)
				ts := clock.ClusterTime()
				ts = optime.MakeTimestamp(ts.Secs(), ts.Inc()+1)
				clock.AdvanceCluster(ts)
				return bson.Timestamp{T: ts.Secs(), I: ts.Inc()}
			},
			// TopologyTime ticks once the new config.shards entry is majority committed.
			TopologyChanged: func(ts bson.Timestamp) {
				st.Concern.Clock.TickTopologyTo(optime.MakeTimestamp(ts.T, ts.I))
			},
		}
	}).(*configsvr.Manager), nil
}
