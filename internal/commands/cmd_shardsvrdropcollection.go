package commands

// _shardsvrDropCollection (the database primary shard's drop coordinator, resumable: spec
// sharding.md "Sharding DDL Coordinator") and _shardsvrDropCollectionParticipant (each
// shard's part of it), and the shard's DDL coordinator service they run on.

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
)

func addShardsvrDropCollection(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_shardsvrDropCollection",
		Auth:      service.AuthInternal,
		Handler:   runShardsvrDropCollection,
		Help:      "Internal command, which is exported by the primary sharding server. Do not call directly. Drops a collection.",
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
	add(r, &service.Command{
		Name:      "_shardsvrDropCollectionParticipant",
		Auth:      service.AuthInternal,
		Handler:   runShardsvrDropCollectionParticipant,
		Help:      "Internal command, which is exported by secondary sharding servers. Do not call directly. Participates in dropping a collection.",
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
}

type ddlCoordinatorsKey struct{}

type ddlCoordinatorsHolder struct{ svc *ddl.CoordinatorService }

// startDDLCoordinators starts a shard's DDL coordinator service (its instances run on the
// primary and resume at each step-up); stop interrupts them.
func startDDLCoordinators(st *service.State, reg *service.Registry, rc *coord.Coordinator) (stop func()) {
	if rc == nil || st.DB == nil {
		return func() {}
	}
	run := internalRunner(st, reg)
	svc := ddl.StartCoordinatorService(ddl.CoordinatorServiceConfig{
		Node:  rc,
		Local: ddl.RunFunc(run),
		WaitMajority: func(ctx context.Context) error {
			_, err := waitMajority(ctx, &service.Env{State: st, Registry: reg}, emptyDoc)
			return err
		},
		Remote: func() (*ddl.Remote, error) { return shardingDDLState(st, reg).remoteFor(st) },
		Self: func() string {
			id, _ := st.Sharding.Identity()
			return id.ShardName
		},
		Shard: shardingDDLState(st, reg).coord,
		Log:   st.Logger,
	})
	st.Decorate(ddlCoordinatorsKey{}, func() any { return &ddlCoordinatorsHolder{svc: svc} })
	// After the migrations' hook (registered first), which forgets the filtering metadata.
	removeHook := rc.BeforeWritable(func() { recoverDDLCriticalSections(st) })
	return func() { removeHook(); svc.Stop() }
}

func ddlCoordinatorsOf(env *service.Env, name string) (*ddl.CoordinatorService, error) {
	if _, err := requireShard(env, name); err != nil {
		return nil, err
	}
	h, _ := env.State.Decorate(ddlCoordinatorsKey{}, func() any { return &ddlCoordinatorsHolder{} }).(*ddlCoordinatorsHolder)
	if h == nil || h.svc == nil {
		return nil, mongoerr.Newf(mongoerr.NoShardingEnabled, "%s: this node does not run DDL coordinators", name)
	}
	return h.svc, nil
}

// runShardsvrDropCollection drops {_shardsvrDropCollection: coll} of the request's database
// through the drop coordinator and answers once it is done everywhere. Reply: {ns}.
func runShardsvrDropCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name := "_shardsvrDropCollection"
	svc, err := ddlCoordinatorsOf(env, name)
	if err != nil {
		return nil, err
	}
	coll, ok := commandArg(cmd).StringValueOK()
	if !ok {
		return nil, typeMismatch(name, name, commandArg(cmd).Type, "string")
	}
	ns := env.DB + "." + coll
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	if err := svc.DropCollection(ctx, ns); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendString("ns", ns).Build(), nil
}

// runShardsvrDropCollectionParticipant is one shard's part of a drop: drop its copy (none is
// fine), delete the range deletion tasks of the dropped incarnation (collectionUUID, when it
// was sharded), and refresh the namespace's filtering metadata, so that versioned requests
// for the dropped incarnation get StaleConfig. Majority before it answers.
func runShardsvrDropCollectionParticipant(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	name := "_shardsvrDropCollectionParticipant"
	if _, err := requireShard(env, name); err != nil {
		return nil, err
	}
	coll, ok := commandArg(cmd).StringValueOK()
	if !ok {
		return nil, typeMismatch(name, name, commandArg(cmd).Type, "string")
	}
	ns := env.DB + "." + coll
	if err := catalog.ValidateNS(ns); err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	// Arguments first: a malformed request changes nothing.
	var uuid []byte
	if v := lookup(cmd, "collectionUUID"); v.Type != 0 {
		sub, data, ok := v.BinaryOK()
		if !ok || sub != 4 || len(data) != 16 {
			return nil, typeMismatch(name, "collectionUUID", v.Type, "uuid")
		}
		uuid = data
	}
	run := internalRunner(env.State, env.Registry)
	dctx := ctx
	if fm, _ := lookup(cmd, "fromMigrate").BooleanOK(); fm {
		// A shard other than the primary: change streams report the primary's drop only.
		dctx = withDropFromMigrate(ctx)
	}
	if _, err := run(dctx, env.DB, bsoncore.NewDocumentBuilder().AppendString("drop", coll).Build()); err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return nil, fmt.Errorf("drop %s on this shard: %w", ns, err)
	}
	if uuid != nil {
		data := uuid
		del := bsoncore.NewDocumentBuilder().AppendString("delete", "rangeDeletions").
			AppendArray("deletes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
				AppendDocument("q", bsoncore.NewDocumentBuilder().AppendBinary("collectionUuid", 4, data).Build()).
				AppendInt32("limit", 0).Build()).Build()).Build()
		if _, err := run(ctx, "config", del); err != nil {
			return nil, fmt.Errorf("delete the range deletion tasks of %s: %w", ns, err)
		}
	}
	rt, _, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	if _, err := rt.RefreshCollection(ctx, ns); err != nil {
		return nil, fmt.Errorf("refresh %s after its drop: %w", ns, err)
	}
	return waitMajority(ctx, env, emptyDoc)
}
