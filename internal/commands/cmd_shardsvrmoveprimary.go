package commands

// movePrimary on the data nodes (MongoDB 7.0's _shardsvrMovePrimary, _shardsvrCloneCatalogData
// and _configsvrCommitMovePrimary): the database's primary shard runs the move through its
// resumable coordinator (internal/sharding/ddl's CoordinatorService.MovePrimary), the
// recipient clones the unsharded collections, the config server commits the new primary
// (configsvr.Manager.CommitMovePrimary).

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/ddl"
)

func addMovePrimaryCommands(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_shardsvrMovePrimary",
		Auth:      service.AuthInternal,
		Handler:   runShardsvrMovePrimary,
		Help:      "should not be calling this directly",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
	add(r, &service.Command{
		Name:      "_shardsvrCloneCatalogData",
		Auth:      service.AuthInternal,
		Handler:   runShardsvrCloneCatalogData,
		Help:      "should not be calling this directly",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
		Writes:    true,
	})
	add(r, &service.Command{
		Name:      "_configsvrCommitMovePrimary",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrCommitMovePrimary,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Commits a movePrimary.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

// runShardsvrMovePrimary is {_shardsvrMovePrimary: "<db>", to: "<shard>"} on the database's
// primary shard, with majority write concern.
func runShardsvrMovePrimary(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	svc, err := ddlCoordinatorsOf(env, "_shardsvrMovePrimary")
	if err != nil {
		return nil, err
	}
	db, to, err := ddl.ParseMovePrimary(cmd, "_shardsvrMovePrimary")
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	if _, _, err := shardRuntime(env); err != nil {
		return nil, err
	}
	if err := svc.MovePrimary(ctx, db, to); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}

// runShardsvrCloneCatalogData is {_shardsvrCloneCatalogData: "<db>", from: "<donor's
// connection string>"} on the recipient of a movePrimary. Reply: {clonedColls: [ns...]}.
func runShardsvrCloneCatalogData(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if _, err := requireShard(env, "_shardsvrCloneCatalogData"); err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	db, ok := lookupFirstString(cmd)
	if !ok || db == "" {
		return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid db name specified")
	}
	if db == "admin" || db == "config" || db == "local" {
		return nil, mongoerr.Newf(mongoerr.InvalidOptions, "Can't clone catalog data for %s database", db)
	}
	from, ok := lookup(cmd, "from").StringValueOK()
	if !ok || from == "" {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Can't run _shardsvrCloneCatalogData without a source")
	}
	s := shardingDDLOf(env)
	remote, err := s.remoteFor(env.State)
	if err != nil {
		return nil, err
	}
	cloned, err := ddl.CloneCatalogData(ctx, s.coord.Local, remote, db, from)
	if err != nil {
		return nil, err
	}
	ab := bsoncore.NewArrayBuilder()
	for _, ns := range cloned {
		ab.AppendString(ns)
	}
	return waitMajority(ctx, env, bsoncore.NewDocumentBuilder().AppendArray("clonedColls", ab.Build()).Build())
}

// runConfigsvrCommitMovePrimary is {_configsvrCommitMovePrimary: "<db>",
// expectedDatabaseVersion, to} on the config server primary, with majority write concern.
func runConfigsvrCommitMovePrimary(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	db, expected, to, err := configsvr.ParseCommitMovePrimary(cmd)
	if err != nil {
		return nil, err
	}
	if err := m.CommitMovePrimary(ctx, db, expected, to); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}

func lookupFirstString(cmd bsoncore.Document) (string, bool) {
	e, err := cmd.IndexErr(0)
	if err != nil {
		return "", false
	}
	return e.Value().StringValueOK()
}
