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
	remote, err := s.cfg.Remote()
	if err != nil {
		return err
	}
	if err := s.checkPrimaryShard(ctx, remote, db); err != nil {
		return err
	}
	h, err := s.svc.GetOrCreate(ctx, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(ns, opSetAllowMigrations)).AppendBoolean("allowMigrations", allow).Build())
	if err != nil {
		return err
	}
	return h.Wait(ctx)
}

type setAllowMigrationsOp struct {
	ddlLocks
	s     *CoordinatorService
	id    bsoncore.Document
	ns    string
	allow bool
	phase string
}

func newSetAllowMigrations(s *CoordinatorService, doc bsoncore.Document) (*setAllowMigrationsOp, error) {
	id, _ := doc.Lookup("_id").DocumentOK()
	o := &setAllowMigrationsOp{s: s, id: append(bsoncore.Document(nil), id...)}
	o.ns, _ = id.Lookup("namespace").StringValueOK()
	o.allow, _ = doc.Lookup("allowMigrations").BooleanOK()
	o.phase, _ = doc.Lookup("phase").StringValueOK()
	db, _, _ := strings.Cut(o.ns, ".")
	o.ddlLocks = newDDLLocks(s, []string{db}, []string{o.ns})
	return o, nil
}

func (o *setAllowMigrationsOp) CheckJoin(doc bsoncore.Document) error {
	if allow, _ := doc.Lookup("allowMigrations").BooleanOK(); allow != o.allow {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Another setAllowMigrations with different arguments is already running for the same namespace %s", o.ns)
	}
	return nil
}

func (o *setAllowMigrationsOp) Run(ctx context.Context) error {
	unlock, err := o.acquire(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	err = primaryonly.RunPhases(ctx, o.phase, []primaryonly.Phase{
		{Name: "setAllowMigrations", Run: o.s.retryingRetriable(o.ns, opSetAllowMigrations, o.set)},
	}, func(ctx context.Context, phase string) error {
		if err := o.s.checkpoint(ctx, o.id, bsoncore.NewDocumentBuilder().AppendString("phase", phase).Build()); err != nil {
			return err
		}
		o.phase = phase
		return nil
	})
	if err != nil && ctx.Err() != nil {
		return err // the next primary resumes it
	}
	// Done or refused (not sharded): the operation ends either way.
	if rerr := o.s.removeDocument(context.WithoutCancel(ctx), o.id); err == nil {
		err = rerr
	}
	return err
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
