package commands

// A data node's sharded-cluster role (internal/sharding/shardstate): what humongod does for
// --configsvr and --shardsvr beyond an ordinary replica-set member. A config server
// initialises its catalog on every step-up (internal/sharding/configsvr); a shard becomes
// shard-aware from the shardIdentity document in admin.system.version, at startup and when
// that document is inserted (MongoDB's ShardingInitializationMongoD and
// ShardServerOpObserver).

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/shardstate"
)

// StartShardingRole gives st its sharding state for role and starts what the role runs in
// the background: on a config server, the catalog initialisation on step-up (rc is the
// node's coordinator). A shard (or a node of no role) reads its shardIdentity document. It
// runs after AttachReplication, before the first connection; stop ends what it started.
func StartShardingRole(ctx context.Context, st *service.State, reg *service.Registry, role shardstate.Role, rc *coord.Coordinator) (stop func(), err error) {
	stop = func() {}
	// The shard's connections to its cluster (sharding DDL) close with the role.
	defer func() { stop = closeShardingDDL(st, reg, stop) }()
	if role != shardstate.RoleNone {
		st.Sharding = shardstate.New(role)
	}
	// Every member under authorization keeps the cluster-time signing keys
	// (clustertime_keys.go): a shard its config server's, any other set its own.
	stopKeys := startClusterTimeKeys(ctx, st, role, rc)
	defer func() {
		if err != nil {
			stopKeys()
			return
		}
		roleStop := stop
		stop = func() { roleStop(); stopKeys() }
	}()
	run := internalRunner(st, reg)
	switch role {
	case shardstate.RoleConfigServer:
		if rc == nil {
			return stop, mongoerr.New(mongoerr.BadValue, "Cannot start a configsvr as a standalone server. Please use the option --replSet to start the node as a replica set.")
		}
		// ConfigTime follows this config server's majority commit point.
		st.Concern.Clock.FollowConfigSource(func() optime.Timestamp { return rc.MajorityCommitted().TS })
		stopBalancer := startBalancer(ctx, st, reg)
		stopCatalog := configsvr.Start(ctx, configsvr.Config{Node: rc, Run: run, Log: st.Logger,
			Initialized: func(id bson.ObjectID) {
				// TopologyTime survives restarts and failovers in config.shards: the newest
				// shard's topologyTime (MongoDB recovers it on step-up the same way).
				if ts, err := newestTopologyTime(ctx, run); err == nil {
					st.Concern.Clock.TickTopologyTo(ts)
				}
				// A config server is its own shard "config" of the cluster it defines.
				if err := st.Sharding.Initialize(shardstate.Identity{ShardName: shardstate.ConfigServerShardID,
					ClusterID: id, ConfigsvrConnectionString: setConnectionString(rc)}); err != nil {
					st.Logger.Error("Failed to initialize the config server's sharding state", logv2.C(logv2.Sharding),
						logv2.ID(9120002), "error", err.Error())
				}
			}})
		stopMerger := startAutoMerger(ctx, st, reg, rc)
		stop = func() { stopMerger(); stopBalancer(); stopCatalog() }
		return stop, nil
	}
	if st.DB == nil {
		return stop, nil
	}
	doc, found, err := readLocalShardIdentity(ctx, st)
	if err != nil {
		return stop, err
	}
	if found && role != shardstate.RoleShardServer {
		st.Logger.Warn("Not started with --shardsvr, but a shardIdentity document was found on disk",
			logv2.C(logv2.Sharding), logv2.ID(22075), "namespace", shardstate.IdentityNS, "shardIdentityDocument", doc.String())
		return stop, nil
	}
	if role == shardstate.RoleShardServer {
		stopRuntime, stopSplitter := startShardRuntime(st, reg, rc), startChunkSplitter(st, reg, rc)
		stopMigrations, stopDDL := startMigrations(st, reg, rc), startDDLCoordinators(st, reg, rc)
		stopTxnCoord := startTxnCoordinator(st, reg, rc) // cmd_coordinatecommit.go
		stop = func() { stopTxnCoord(); stopDDL(); stopMigrations(); stopSplitter(); stopRuntime() }
		stop = startRangeDeleter(ctx, st, rc, stop) // sharding_rangedel.go
	}
	if found {
		return stop, initShardIdentity(st, doc)
	}
	if role == shardstate.RoleShardServer && rc != nil {
		stopRuntime, stopWatch := stop, watchReplicatedShardIdentity(ctx, st, rc)
		return func() { stopWatch(); stopRuntime() }, nil
	}
	return stop, nil
}

// watchReplicatedShardIdentity makes a shard's secondary shard-aware when the shardIdentity
// document reaches it through replication (MongoDB's ShardServerOpObserver runs on
// secondaries too): after each applied batch, until the node is aware, it looks the document
// up in its own storage. The primary's insert path does the same at once; either way the
// identity is the same, so whichever comes second does nothing.
func watchReplicatedShardIdentity(ctx context.Context, st *service.State, rc *coord.Coordinator) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			progress := rc.Progress()
			if _, aware := st.Sharding.Identity(); aware {
				return
			}
			doc, found, err := readLocalShardIdentity(ctx, st)
			if err == nil && found {
				err = initShardIdentity(st, doc)
			}
			if err != nil && ctx.Err() == nil {
				st.Logger.Error("Failed to initialize sharding state from the replicated shard identity",
					logv2.C(logv2.Sharding), logv2.ID(9120004), "error", err.Error())
			}
			if found {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-progress:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// readLocalShardIdentity reads the shardIdentity document straight from this node's storage
// (on any member state: no read-preference rules apply to the server's own lookup).
func readLocalShardIdentity(ctx context.Context, st *service.State) (bsoncore.Document, bool, error) {
	op := st.DB.NewOp(ctx)
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, shardstate.IdentityNS)
	if err != nil {
		return nil, false, err
	}
	defer release()
	if coll == nil {
		return nil, false, nil
	}
	_, d, found, err := coll.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, shardstate.IdentityID)})
	if err != nil || !found {
		return nil, false, err
	}
	return append(bsoncore.Document(nil), d...), true, nil
}

// initShardIdentity makes a shard shard-aware from its identity document.
func initShardIdentity(st *service.State, doc bsoncore.Document) error {
	id, err := shardstate.ParseIdentity(doc)
	if err != nil {
		return err
	}
	if err := st.Sharding.Initialize(id); err != nil {
		return err
	}
	st.Logger.Info("Initializing sharding state with shard identity", logv2.C(logv2.Sharding), logv2.ID(22072),
		"shardIdentity", doc.String())
	return nil
}

// shardIdentityCheck is the insert path's check of a document bound for admin.system.version
// on a shard (ShardServerOpObserver::onInserts): a shardIdentity document must be valid.
// nil when the node is not a shard or the namespace is another.
func shardIdentityCheck(st *service.State, ns string) func(bsoncore.Document) error {
	if ns != shardstate.IdentityNS || st.Sharding.Role() != shardstate.RoleShardServer {
		return nil
	}
	return func(d bsoncore.Document) error {
		if !shardstate.IsIdentityDoc(d) {
			return nil
		}
		_, err := shardstate.ParseIdentity(d)
		return err
	}
}

// afterShardIdentityInsert makes a shard shard-aware once an insert into admin.system.version
// has committed a shardIdentity document (read back, so only what was written counts).
func afterShardIdentityInsert(ctx context.Context, env *service.Env, ns string, docs []bsoncore.Document) {
	st := env.State
	if ns != shardstate.IdentityNS || st.Sharding.Role() != shardstate.RoleShardServer {
		return
	}
	if _, aware := st.Sharding.Identity(); aware {
		return
	}
	has := false
	for _, d := range docs {
		has = has || shardstate.IsIdentityDoc(d)
	}
	if !has {
		return
	}
	doc, found, err := readShardIdentity(ctx, internalRunner(st, env.Registry))
	if err == nil && found {
		err = initShardIdentity(st, doc)
	}
	if err != nil {
		st.Logger.Error("Failed to initialize sharding state from the inserted shard identity", logv2.C(logv2.Sharding),
			logv2.ID(9120003), "error", err.Error())
	}
}

// readShardIdentity reads admin.system.version's shardIdentity document.
func readShardIdentity(ctx context.Context, run configsvr.RunFunc) (bsoncore.Document, bool, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "system.version").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("_id", shardstate.IdentityID).Build()).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build()
	reply, err := run(ctx, "admin", cmd)
	if err != nil {
		return nil, false, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return nil, false, nil
	}
	d, _ := vals[0].DocumentOK()
	return append(bsoncore.Document(nil), d...), true, nil
}

// internalRunner runs commands on this node in-process, as the server's own client (MongoDB's
// DBDirectClient): through the registry's handlers, with no connection.
func internalRunner(st *service.State, reg *service.Registry) configsvr.RunFunc {
	return func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
		elems, err := cmd.Elements()
		if err != nil || len(elems) == 0 {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "empty internal command")
		}
		name := elems[0].Key()
		c := reg.Lookup(name)
		if c == nil {
			return nil, mongoerr.Newf(mongoerr.CommandNotFound, "no such command: '%s'", name)
		}
		full := append(bsoncore.Document(nil), cmd[:len(cmd)-1]...)
		full = bsoncore.AppendStringElement(full, "$db", db)
		full = append(full, 0)
		full = bsoncore.UpdateLength(full, 0, int32(len(full)))
		return c.Handler(ctx, &service.Env{DB: db, Name: name, Command: c, State: st, Registry: reg}, full)
	}
}

// setConnectionString is the replica set's connection string "set/host,host" from the
// coordinator's current config.
func setConnectionString(rc *coord.Coordinator) string {
	cfg, err := rc.Config()
	if err != nil {
		return ""
	}
	setName, _ := cfg.Lookup("_id").StringValueOK()
	arr, _ := cfg.Lookup("members").ArrayOK()
	vals, _ := arr.Values()
	hosts := make([]string, 0, len(vals))
	for _, v := range vals {
		m, _ := v.DocumentOK()
		if h, ok := m.Lookup("host").StringValueOK(); ok {
			hosts = append(hosts, h)
		}
	}
	return setName + "/" + strings.Join(hosts, ",")
}

// newestTopologyTime is the highest topologyTime in config.shards (null with no shards).
func newestTopologyTime(ctx context.Context, run configsvr.RunFunc) (optime.Timestamp, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "shards").
		AppendDocument("sort", bsoncore.NewDocumentBuilder().AppendInt32("topologyTime", -1).Build()).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build()
	reply, err := run(ctx, "config", cmd)
	if err != nil {
		return 0, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	if len(vals) == 0 {
		return 0, nil
	}
	d, _ := vals[0].DocumentOK()
	t, i, _ := d.Lookup("topologyTime").TimestampOK()
	return optime.MakeTimestamp(t, i), nil
}
