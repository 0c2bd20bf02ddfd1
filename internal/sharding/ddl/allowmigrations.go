package ddl

// The set-allow-migrations coordinator (MongoDB 7.0's SetAllowMigrationsCoordinator, spec:
// sharding.md "Sharding DDL Coordinator"): setAllowMigrations on the database's primary
// shard, under the DDL locks, so it is serialized with the other DDL of the namespace; its
// one phase sets or clears config.collections allowMigrations through the config server
// (_configsvrSetAllowMigrations, under the config server's commit lock), which makes every
// later migration commit of the collection fail while it is false.

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
)

const opSetAllowMigrations = "setAllowMigrations"

// SetAllowMigrations stops (allow false) or resumes the migrations of the sharded collection
// ns through its coordinator on this shard, ns's database's primary shard.
func (s *CoordinatorService) SetAllowMigrations(ctx context.Context, ns string, allow bool) error {
	db, _, _ := strings.Cut(ns, ".")
	_, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(ns, opSetAllowMigrations)).AppendBoolean("allowMigrations", allow).Build())
	return err
}

type setAllowMigrationsOp struct {
	coordinator
	allow bool
}

func newSetAllowMigrations(s *CoordinatorService, doc bsoncore.Document) (*setAllowMigrationsOp, error) {
	id, _ := doc.Lookup("_id").DocumentOK()
	ns, _ := id.Lookup("namespace").StringValueOK()
	db, _, _ := strings.Cut(ns, ".")
	o := &setAllowMigrationsOp{coordinator: newCoordinator(s, doc, []string{db}, []string{ns})}
	o.allow, _ = doc.Lookup("allowMigrations").BooleanOK()
	return o, nil
}

func (o *setAllowMigrationsOp) CheckJoin(doc bsoncore.Document) error {
	if allow, _ := doc.Lookup("allowMigrations").BooleanOK(); allow != o.allow {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Another setAllowMigrations with different arguments is already running for the same namespace %s", o.ns)
	}
	return nil
}

// Run: done or refused (the collection is not sharded), the operation ends either way.
func (o *setAllowMigrationsOp) Run(ctx context.Context) error {
	return o.run(ctx, opSetAllowMigrations, []primaryonly.Phase{
		{Name: "setAllowMigrations", Run: o.s.retryingRetriable(o.ns, opSetAllowMigrations, o.set)},
	}, func(ctx context.Context, phase string) error { return o.checkpointPhase(ctx, phase, nil) }, "setAllowMigrations")
}

func (o *setAllowMigrationsOp) set(ctx context.Context) error {
	remote, err := o.s.cfg.Remote()
	if err != nil {
		return err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("_configsvrSetAllowMigrations", o.ns).
		AppendBoolean("allowMigrations", o.allow).AppendDocument("writeConcern", majority()).Build()
	_, err = Run(ctx, remote.Config(), "admin", cmd)
	return err
}
