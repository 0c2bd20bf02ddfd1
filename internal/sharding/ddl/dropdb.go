package ddl

// The drop-database coordinator (MongoDB 7.0's DropDatabaseCoordinator, spec: sharding.md
// "Sharding DDL Coordinator"): dropDatabase on the database's primary shard, under the
// database's DDL lock, resumably. Phases, each checkpointed before it runs and idempotent:
//
//   - dropShardedCollections: each sharded collection of the database is dropped as the drop
//     coordinator drops one (catalog entries, zones, every shard's copy); a resumed phase
//     finds only those left;
//   - dropDatabaseOnShards: every shard drops its copy of the database
//     (_shardsvrDropDatabaseParticipant);
//   - removeMetadata: the config.databases entry goes, then every shard forgets the
//     database's version (_flushDatabaseCacheUpdates). This phase never drops data, so a
//     database created again right after the entry is gone is safe from a resumed one.

import (
	"context"
	"regexp"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/configsvr"
)

const opDropDatabase = "dropDatabase"

// DropDatabase drops db through its coordinator on this shard, db's primary shard, and
// waits for its end (a concurrent dropDatabase joins).
func (s *CoordinatorService) DropDatabase(ctx context.Context, db string) error {
	_, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(db, opDropDatabase)).Build())
	return err
}

type dropDatabase struct{ coordinator }

func newDropDatabase(s *CoordinatorService, doc bsoncore.Document) (*dropDatabase, error) {
	id, _ := doc.Lookup("_id").DocumentOK()
	db, _ := id.Lookup("namespace").StringValueOK()
	return &dropDatabase{newCoordinator(s, doc, []string{db}, nil)}, nil
}

// CheckJoin: every dropDatabase of the database joins.
func (d *dropDatabase) CheckJoin(bsoncore.Document) error { return nil }

func (d *dropDatabase) Run(ctx context.Context) error {
	retry := func(step func(context.Context) error) func(context.Context) error {
		return d.s.retryingAll(d.ns, opDropDatabase, step)
	}
	return d.run(ctx, opDropDatabase, []primaryonly.Phase{
		{Name: "dropShardedCollections", Run: retry(d.dropShardedCollections)},
		{Name: "dropDatabaseOnShards", Run: retry(d.dropOnShards)},
		{Name: "removeMetadata", Run: retry(d.removeMetadata)},
	}, func(ctx context.Context, phase string) error { return d.checkpointPhase(ctx, phase, nil) })
}

func (d *dropDatabase) dropShardedCollections(ctx context.Context) error {
	remote, err := d.s.cfg.Remote()
	if err != nil {
		return err
	}
	docs, err := configsvr.FindAll(ctx, remoteRun(remote), "collections", bsoncore.NewDocumentBuilder().
		AppendRegex("_id", "^"+regexp.QuoteMeta(d.ns)+`\.`, "").Build(), nil)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		coll, err := configclient.ParseCollection(doc)
		if err != nil {
			return err
		}
		dc := &dropCollection{coordinator: coordinator{s: d.s, ns: coll.NS}, sharded: true, uuid: coll.UUID}
		if err := dc.drop(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (d *dropDatabase) dropOnShards(ctx context.Context) error {
	if err := fpDropDBHang.PauseWhileSet(ctx); err != nil {
		return err
	}
	// The other shards first, their entries marked fromMigrate, then this one, the primary:
	// change streams see the primary's drops and dropDatabase only, after every other event.
	others := bsoncore.NewDocumentBuilder().AppendInt32("_shardsvrDropDatabaseParticipant", 1).
		AppendBoolean("fromMigrate", true).Build()
	if err := d.s.everyShardBut(ctx, d.ns, others, true); err != nil {
		return err
	}
	_, err := d.s.cfg.Local(ctx, d.ns, bsoncore.NewDocumentBuilder().AppendInt32("_shardsvrDropDatabaseParticipant", 1).Build())
	return err
}

func (d *dropDatabase) removeMetadata(ctx context.Context) error {
	remote, err := d.s.cfg.Remote()
	if err != nil {
		return err
	}
	if err := configDeleteMany(ctx, remote, "databases", bsoncore.NewDocumentBuilder().AppendString("_id", d.ns).Build()); err != nil {
		return err
	}
	err = d.s.everyShard(ctx, "admin", bsoncore.NewDocumentBuilder().AppendString("_flushDatabaseCacheUpdates", d.ns).Build())
	if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return nil
	}
	return err
}

// everyShard runs cmd on db of every shard in the registry, this one in-process, the others
// with majority write concern.
func (s *CoordinatorService) everyShard(ctx context.Context, db string, cmd bsoncore.Document) error {
	return s.everyShardBut(ctx, db, cmd, false)
}

// everyShardBut is everyShard, skipping this shard when othersOnly.
func (s *CoordinatorService) everyShardBut(ctx context.Context, db string, cmd bsoncore.Document, othersOnly bool) error {
	remote, err := s.cfg.Remote()
	if err != nil {
		return err
	}
	if err := remote.Shards.Reload(ctx); err != nil {
		return err
	}
	shards, err := remote.Shards.All(ctx)
	if err != nil {
		return err
	}
	self := s.cfg.Self()
	for _, sh := range shards {
		if sh.ID == self {
			if othersOnly {
				continue
			}
			if _, err := s.cfg.Local(ctx, db, cmd); err != nil {
				return err
			}
			continue
		}
		rs, err := remote.Shard(ctx, sh.ID)
		if err != nil {
			return err
		}
		if _, err := Run(ctx, rs, db, appendField(cmd, "writeConcern", majority())); err != nil {
			return err
		}
	}
	return nil
}
