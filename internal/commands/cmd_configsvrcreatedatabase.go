package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

// _configsvrCreateDatabase: the config server's creation of a database's config.databases
// entry (MongoDB 7.0's ConfigSvrCreateDatabaseCommand), sent by the router's enableSharding
// and by its implicit creation of a database on first write. The logic is
// configsvr.Manager.CreateDatabase.
func addConfigsvrCreateDatabase(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrCreateDatabase",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrCreateDatabase,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Create a database.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

// runConfigsvrCreateDatabase answers ConfigsvrCreateDatabaseResponse: {databaseVersion}.
func runConfigsvrCreateDatabase(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	if err := requireMajorityWriteConcern(env, cmd); err != nil {
		return nil, err
	}
	req, err := configsvr.ParseCreateDatabase(cmd)
	if err != nil {
		return nil, err
	}
	db, err := m.CreateDatabase(ctx, req)
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendDocument("databaseVersion", db.Version.Doc()).Build(), nil
}
