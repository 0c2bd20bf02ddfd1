package commands

// The balancer on a config server and its commands (internal/sharding/balancer; spec:
// sharding.md "Auto-balancing"): the balancer thread started with the config server role
// (it runs while the node is a writable primary), its connections to the shards, the
// config server's _configsvrBalancerStart/Stop/Status/CollectionStatus, and the shards'
// _shardsvrGetStatsForBalancing that the balancer asks for data sizes.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
	"humongo/internal/sharding/balancer"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/shardregistry"
)

func addBalancerCommands(r *service.Registry) {
	for _, c := range []*service.Command{
		{Name: "_configsvrBalancerStart", Auth: service.AuthInternal, Handler: runConfigsvrBalancerControl, AdminOnly: true, Secondary: service.SecondaryNever, Writes: true,
			Help: "Internal command, which is exported by the sharding config server. Do not call directly. Controls the balancer state."},
		{Name: "_configsvrBalancerStop", Auth: service.AuthInternal, Handler: runConfigsvrBalancerControl, AdminOnly: true, Secondary: service.SecondaryNever, Writes: true,
			Help: "Internal command, which is exported by the sharding config server. Do not call directly. Controls the balancer state."},
		{Name: "_configsvrBalancerCollectionStatus", Auth: service.AuthInternal, Handler: runConfigsvrBalancerCollectionStatus, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "Internal command, which is exported by the sharding config server. Do not call directly. Checks whether the chunks of a given collection are in a quiesced state or there are any which need to be moved because of (1) draining shards, (2) zone violation or (3) imbalance between shards"},
		configureCollectionBalancingCommand(),
		{Name: "_shardsvrGetStatsForBalancing", Auth: service.AuthInternal, Handler: runShardsvrGetStatsForBalancing, AdminOnly: true, Secondary: service.SecondaryNever,
			Help: "Internal command invoked by the config server to retrieve statistics from shard used for balancing"},
	} {
		add(r, c)
	}
}

type balancerKey struct{}

// configBalancer is a config server's balancer and its shard connections.
type configBalancer struct {
	b      *balancer.Balancer
	shards *balancerShards
}

// balancerState returns the config server's balancer, built on first use.
func balancerState(st *service.State, reg *service.Registry) *configBalancer {
	return st.Decorate(balancerKey{}, func() any {
		run := internalRunner(st, reg)
		shards := &balancerShards{run: run, opts: shardClientOptions(st, "humongod-balancer", 15*time.Second), conns: map[string]*client.ReplicaSet{}}
		cfg := balancer.Config{
			Run:    balancer.RunFunc(run),
			Shards: shards,
			Log:    st.Logger,
			Interval: func() time.Duration {
				return time.Duration(st.Params.Int("balancerRoundIntervalMs")) * time.Millisecond
			},
			Throttle: func() time.Duration {
				return time.Duration(st.Params.Int("balancerMigrationsThrottlingMs")) * time.Millisecond
			},
		}
		if st.Repl != nil {
			cfg.Node = st.Repl
			cfg.Host = st.Repl.Self()
		}
		return &configBalancer{b: balancer.New(cfg), shards: shards}
	}).(*configBalancer)
}

// startBalancer runs the config server's balancer on the node's primary stints (MongoDB's
// Balancer::onStepUpComplete and onStepDown); stop ends it and closes its connections.
func startBalancer(ctx context.Context, st *service.State, reg *service.Registry) (stop func()) {
	cb := balancerState(st, reg)
	stopLoop := cb.b.Start(ctx)
	return func() {
		stopLoop()
		cb.shards.close()
	}
}

// balancerShards runs the balancer's commands on shard primaries, found in the node's
// config.shards.
type balancerShards struct {
	run    configsvr.RunFunc
	opts   client.Options
	mu     sync.Mutex
	conns  map[string]*client.ReplicaSet
	closed bool
}

func (s *balancerShards) Run(ctx context.Context, shard, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	rs, err := s.conn(ctx, shard)
	if err != nil {
		return nil, err
	}
	return ddl.Run(ctx, rs, db, cmd)
}

func (s *balancerShards) conn(ctx context.Context, id string) (*client.ReplicaSet, error) {
	reply, err := s.run(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("find", "shards").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("_id", id).Build()).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build())
	if err != nil {
		return nil, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return nil, mongoerr.Newf(mongoerr.ShardNotFound, "Shard %s not found", id)
	}
	d, _ := vals[0].DocumentOK()
	sh, err := shardregistry.ParseShard(d)
	if err != nil {
		return nil, err
	}
	hosts, err := client.ParseReplicaSetHosts(sh.Host)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "the server is shutting down")
	}
	if rs := s.conns[id]; rs != nil && rs.Hosts().String() == hosts.String() {
		return rs, nil
	} else if rs != nil {
		go func() { _ = rs.Close(context.Background()) }()
	}
	rs, err := client.NewReplicaSet(hosts, s.opts)
	if err != nil {
		return nil, err
	}
	s.conns[id] = rs
	return rs, nil
}

func (s *balancerShards) close() {
	s.mu.Lock()
	conns := s.conns
	s.conns, s.closed = nil, true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, rs := range conns {
		_ = rs.Close(ctx)
	}
}

// runConfigsvrBalancerControl is ConfigSvrBalancerControlCommand: start sets mode full,
// stop sets mode off (config.settings {_id: "balancer"}, $set {stopped, mode}, upserted,
// majority) and wakes the balancer; stop then waits for the round in progress.
func runConfigsvrBalancerControl(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := requireConfigServer(env, env.Command.Name); err != nil {
		return nil, err
	}
	start := env.Command.Name == "_configsvrBalancerStart"
	mode := balancer.ModeOff
	if start {
		mode = balancer.ModeFull
	}
	set := bsoncore.NewDocumentBuilder().AppendBoolean("stopped", !start).AppendString("mode", mode).Build()
	upd := bsoncore.NewDocumentBuilder().AppendString("update", "settings").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendString("_id", balancer.SettingsID).Build()).
			AppendDocument("u", bsoncore.NewDocumentBuilder().AppendDocument("$set", set).Build()).
			AppendBoolean("upsert", true).Build()).Build()).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	reply, err := internalRunner(env.State, env.Registry)(ctx, "config", upd)
	if err == nil {
		err = configsvr.WriteReplyError(reply)
	}
	if err != nil {
		return nil, fmt.Errorf("Failed to set the balancer mode to %s :: caused by :: %w", mode, err)
	}
	b := balancerState(env.State, env.Registry).b
	b.Wake()
	if !start {
		if err := b.JoinCurrentRound(ctx); err != nil {
			return nil, err
		}
	}
	return emptyDoc, nil
}

// runConfigsvrBalancerStatus: the balancer's report (Balancer::report): the mode from
// config.settings, whether a round runs and how many ran on this node.
func runConfigsvrBalancerStatus(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	if err := requireConfigServer(env, env.Command.Name); err != nil {
		return nil, err
	}
	settings, err := balancer.ReadSettings(ctx, balancer.RunFunc(internalRunner(env.State, env.Registry)))
	if err != nil {
		return nil, err
	}
	in, rounds := balancerState(env.State, env.Registry).b.Status()
	b := bsoncore.NewDocumentBuilder().AppendString("mode", settings.Mode).
		AppendBoolean("inBalancerRound", in).AppendInt64("numBalancerRounds", rounds)
	if env.State.Repl != nil {
		b.AppendInt64("term", env.State.Repl.Term())
	}
	return b.Build(), nil
}

// runConfigsvrBalancerCollectionStatus is Balancer::getBalancerStatusForNs:
// {chunkSize: <MB>, balancerCompliant, firstComplianceViolation?}.
func runConfigsvrBalancerCollectionStatus(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := requireConfigServer(env, env.Command.Name); err != nil {
		return nil, err
	}
	ns, err := balancerCollectionStatusNS(env.Command.Name, cmd)
	if err != nil {
		return nil, err
	}
	compliant, violation, mb, err := balancerState(env.State, env.Registry).b.CollectionStatus(ctx, ns)
	if err != nil {
		return nil, err
	}
	b := bsoncore.NewDocumentBuilder().AppendInt64("chunkSize", mb).AppendBoolean("balancerCompliant", compliant)
	if !compliant {
		b.AppendString("firstComplianceViolation", violation)
	}
	return b.Build(), nil
}

// balancerCollectionStatusNS reads {<name>: "db.coll"} (IDL namespace: type).
func balancerCollectionStatusNS(name string, cmd bsoncore.Document) (string, error) {
	v := cmd.Lookup(name)
	ns, ok := v.StringValueOK()
	if !ok {
		return "", mongoerr.Newf(mongoerr.TypeMismatch, "collection name has invalid type %s", v.Type)
	}
	if !validCollectionNS(ns) {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	return ns, nil
}

func validCollectionNS(ns string) bool {
	for i := 0; i < len(ns); i++ {
		if ns[i] == 0 {
			return false
		}
		if ns[i] == '.' {
			return i > 0 && i < len(ns)-1
		}
	}
	return false
}

// runShardsvrGetStatsForBalancing is ShardsvrGetStatsForBalancingCmd: for each collection
// {ns, UUID?}, the data this shard owns: average document size times the documents that
// are not orphans (numOrphanDocs of the collection's config.rangeDeletions tasks), 0 for a
// missing collection or another UUID, divided by scaleFactor (default 1 MiB).
func runShardsvrGetStatsForBalancing(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if _, err := requireShard(env, env.Command.Name); err != nil {
		return nil, err
	}
	const name = "ShardsvrGetStatsForBalancing"
	v, err := cmd.LookupErr("collections")
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.collections' is missing but a required field", name)
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.collections' is the wrong type '%s', expected type 'array'", name, v.Type)
	}
	colls, _ := arr.Values()
	if len(colls) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "At least one collection must be specified")
	}
	scale := int64(1 << 20)
	if sv, err := cmd.LookupErr("scaleFactor"); err == nil {
		n, ok := sv.AsInt64OK()
		if !ok || n <= 0 {
			return nil, mongoerr.Newf(mongoerr.BadValue, "BSON field '%s.scaleFactor' must be a positive integer", name)
		}
		scale = n
	}
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	run := internalRunner(env.State, env.Registry)
	out := bsoncore.NewArrayBuilder()
	for _, cv := range colls {
		c, ok := cv.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.collections' contains a non-object element", name)
		}
		ns, ok := c.Lookup("ns").StringValueOK()
		if !ok || !validCollectionNS(ns) {
			return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
		}
		size, err := balancingDataSize(ctx, db, run, ns, c.Lookup("UUID"))
		if err != nil {
			return nil, err
		}
		out.AppendDocument(bsoncore.NewDocumentBuilder().AppendString("namespace", ns).AppendInt64("collSize", size/scale).Build())
	}
	return bsoncore.NewDocumentBuilder().AppendArray("stats", out.Build()).Build(), nil
}

// balancingDataSize is _getCollDataSizeBytes: bytes of ns that this shard owns.
func balancingDataSize(ctx context.Context, db *operation.DB, run configsvr.RunFunc, ns string, wantUUID bsoncore.Value) (int64, error) {
	op := db.NewOp(ctx)
	m, _, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		op.Close()
		return 0, err
	}
	var uuid catalog.UUID
	var count, data int64
	if m != nil {
		uuid = m.UUID
		count, data, _, _, _, _ = ddlCollectionSizes(db, m)
	}
	release()
	op.Close()
	if m == nil || count == 0 || data == 0 {
		return 0, nil
	}
	if sub, b, ok := wantUUID.BinaryOK(); ok && (sub != 4 || len(b) != 16 || catalog.UUID(b) != uuid) {
		return 0, nil
	}
	// BalancerStatsRegistry's orphan count: the numOrphanDocs of the collection's range
	// deletion tasks.
	reply, err := run(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("aggregate", "rangeDeletions").
		AppendArray("pipeline", bsoncore.NewArrayBuilder().
			AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("$match", bsoncore.NewDocumentBuilder().
				AppendBinary("collectionUuid", 4, uuid[:]).Build()).Build()).
			AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("$group", bsoncore.NewDocumentBuilder().
				AppendNull("_id").AppendDocument("n", bsoncore.NewDocumentBuilder().AppendString("$sum", "$numOrphanDocs").Build()).Build()).Build()).
			Build()).
		AppendDocument("cursor", bsoncore.NewDocumentBuilder().Build()).Build())
	if err != nil {
		return 0, err
	}
	var orphans int64
	if batch, ok := reply.Lookup("cursor", "firstBatch").ArrayOK(); ok {
		if vals, _ := batch.Values(); len(vals) > 0 {
			d, _ := vals[0].DocumentOK()
			orphans, _ = d.Lookup("n").AsInt64OK()
		}
	}
	if count <= orphans {
		// The record count and the orphan count are not updated atomically.
		return 0, nil
	}
	return data / count * (count - orphans), nil
}
