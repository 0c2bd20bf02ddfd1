package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/service"
)

func addDropDatabase(r *service.Registry) {
	add(r, &service.Command{
		Name:    "dropDatabase",
		Auth:    service.AuthOnDB(auth.DropDatabase),
		Handler: runDropDatabase,
		Help:    "drop (delete) this database",
		Writes:  true,
	})
}

// runDropDatabase drops every collection of the database under the database X lock in one
// unit. A database that does not exist answers a bare {ok: 1}, as in MongoDB 7.0.
func runDropDatabase(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(cmd, "dropDatabase"); err != nil {
		return nil, err
	}
	if v := commandArg(cmd); !(v.Type == bsoncore.TypeInt32 || v.Type == bsoncore.TypeInt64 ||
		v.Type == bsoncore.TypeDouble || v.Type == bsoncore.TypeBoolean) || !truthy(v) {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "have to pass 1 as db parameter")
	}
	switch env.DB {
	case "admin", "config", "local":
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Dropping the '%s' database is prohibited.", env.DB)
	}
	if !catalog.ValidDBName(env.DB) {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid database name: '%s'", env.DB)
	}
	op := db.NewOp(ctx)
	defer op.Close()
	existed := false
	err = op.DatabaseDDL(ctx, env.DB, func() error {
		colls := db.Catalog.Latest().Collections(env.DB)
		existed = len(colls) > 0
		if dropFromMigrate(ctx) {
			defer opobserver.WithFromMigrate(op.RU)()
		}
		var uuids []catalog.UUID
		for _, m := range colls {
			// Each drop's entry before its catalog writes: they carry its timestamp.
			if err := db.Observer().OnDropCollection(op.RU, m.NS, m.UUID); err != nil {
				return err
			}
			if err := db.Catalog.DropCollection(op.RU, m.NS); err != nil {
				return err
			}
			uuids = append(uuids, m.UUID)
		}
		ddlForgetOnCommit(op, uuids...)
		if !existed {
			return nil
		}
		return db.Observer().OnDropDatabase(op.RU, env.DB)
	})
	if err != nil {
		return nil, err
	}
	ddlKillDatabaseCursors(env, env.DB)
	if !existed {
		return emptyDoc, nil
	}
	return doc(func(b []byte) []byte { return bsoncore.AppendStringElement(b, "dropped", env.DB) }), nil
}
