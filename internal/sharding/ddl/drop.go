package ddl

// The drop-collection coordinator (MongoDB 7.0's DropCollectionCoordinator, spec:
// sharding.md "Sharding DDL Coordinator"): the database's primary shard drops a collection,
// sharded or not, everywhere, resumably. Phases:
//
//   - freezeCollection: read what the collection is from the config server (sharded, its
//     UUID), recorded in the state document with the next checkpoint, so a resumed
//     coordinator drops that incarnation and never a collection created after it;
//   - enterCriticalSection: every shard blocks the namespace's versioned reads and writes
//     (a persisted critical section, _shardsvrParticipantBlock), so that no routed write
//     recreates the collection on a shard between its drop there and its refresh;
//   - dropCollection: remove the incarnation's config.collections entry, its chunks and
//     the namespace's zones (majority), then have every shard drop its copy, delete the
//     incarnation's range deletion tasks and refresh its filtering metadata
//     (_shardsvrDropCollectionParticipant);
//   - releaseCriticalSection: every shard refreshes and unblocks the namespace.
//
// Every step is idempotent; a destructive phase is redone after any failure until it ends.
//
// The state document is deleted last: a drop acknowledged to the client is complete.
// Its remote calls go through dropCluster, so that sim_test.go runs these phases
// deterministically under crashes at every step.

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/failpoint"
	"humongo/internal/primaryonly"
)

const opDropCollection = "dropCollection"

// Fail points of the drop coordinator, for tests that kill its primary mid-way: hang at the
// start of the dropCollection phase (after its checkpoint) and after the config server's
// metadata is gone (before the participants drop).
var (
	fpDropHangBeforeDrop         = failpoint.Register("hangDropCollectionBeforeDrop")
	fpDropHangAfterConfigRemoval = failpoint.Register("hangDropCollectionAfterConfigRemoval")
)

// DropCollection drops ns through its coordinator on this shard, the database's primary
// shard: it starts one (or joins the running one) and waits for its end.
func (s *CoordinatorService) DropCollection(ctx context.Context, ns string) error {
	db, _, _ := strings.Cut(ns, ".")
	_, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().AppendDocument("_id", coordinatorDocID(ns, opDropCollection)).Build())
	return err
}

type dropCollection struct {
	coordinator
	// What freezeCollection found: a sharded collection's UUID.
	sharded bool
	uuid    catalog.UUID
	// resumed: built from a document with a phase (a new primary's rebuild).
	resumed bool
}

func newDropCollection(s *CoordinatorService, doc bsoncore.Document) (*dropCollection, error) {
	id, _ := doc.Lookup("_id").DocumentOK()
	ns, _ := id.Lookup("namespace").StringValueOK()
	db, _, _ := strings.Cut(ns, ".")
	d := &dropCollection{coordinator: newCoordinator(s, doc, []string{db}, []string{ns})}
	d.resumed = d.phase != ""
	if info, ok := doc.Lookup("collInfo").DocumentOK(); ok {
		d.sharded, _ = info.Lookup("sharded").BooleanOK()
		if sub, data, ok := info.Lookup("uuid").BinaryOK(); ok && sub == 4 && len(data) == 16 {
			copy(d.uuid[:], data)
		}
	}
	return d, nil
}

// CheckJoin: a drop has no options, every drop of the namespace joins.
func (d *dropCollection) CheckJoin(bsoncore.Document) error { return nil }

func (d *dropCollection) Run(ctx context.Context) error {
	return d.run(ctx, opDropCollection, []primaryonly.Phase{
		{Name: "freezeCollection", Run: d.freeze},
		{Name: "enterCriticalSection", Run: d.s.retryingAll(d.ns, opDropCollection, d.block)},
		{Name: "dropCollection", Run: d.s.retryingAll(d.ns, opDropCollection, d.drop)},
		{Name: "releaseCriticalSection", Run: d.s.retryingAll(d.ns, opDropCollection, d.unblock)},
	}, d.checkpoint, "freezeCollection")
}

func (d *dropCollection) checkpoint(ctx context.Context, phase string) error {
	if d.s.knobs.dropPhaseUncheckpointed && phase != "freezeCollection" {
		return nil
	}
	if phase == "freezeCollection" {
		return d.checkpointPhase(ctx, phase, nil)
	}
	return d.checkpointPhase(ctx, phase, func(set *bsoncore.DocumentBuilder) {
		info := bsoncore.NewDocumentBuilder().AppendBoolean("sharded", d.sharded)
		if d.sharded {
			info.AppendBinary("uuid", 4, d.uuid[:])
		}
		set.AppendDocument("collInfo", info.Build())
	})
}

// freeze reads what the namespace is on the config server.
func (d *dropCollection) freeze(ctx context.Context) error {
	cl, err := d.s.dropCluster()
	if err != nil {
		return err
	}
	sharded, uuid, err := cl.collection(ctx, d.ns)
	if err != nil {
		return err
	}
	d.sharded = sharded
	if sharded {
		d.uuid = uuid
	}
	return nil
}

func (d *dropCollection) drop(ctx context.Context) error {
	if err := fpDropHangBeforeDrop.PauseWhileSet(ctx); err != nil {
		return err
	}
	cl, err := d.s.dropCluster()
	if err != nil {
		return err
	}
	db, coll, _ := strings.Cut(d.ns, ".")
	if d.sharded {
		for _, del := range []struct {
			coll string
			q    bsoncore.Document
		}{
			{"collections", bsoncore.NewDocumentBuilder().AppendString("_id", d.ns).AppendBinary("uuid", 4, d.uuid[:]).Build()},
			{"chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, d.uuid[:]).Build()},
			{"tags", bsoncore.NewDocumentBuilder().AppendString("ns", d.ns).Build()},
		} {
			cmd := bsoncore.NewDocumentBuilder().AppendString("delete", del.coll).
				AppendArray("deletes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
					AppendDocument("q", del.q).AppendInt32("limit", 0).Build()).Build()).
				AppendDocument("writeConcern", majority()).Build()
			if err := cl.configWrite(ctx, cmd); err != nil {
				return err
			}
		}
	}
	if err := fpDropHangAfterConfigRemoval.PauseWhileSet(ctx); err != nil {
		return err
	}
	if d.resumed && d.s.knobs.skipParticipantsOnResume {
		return nil
	}
	participant := func(fromMigrate bool) bsoncore.Document {
		b := bsoncore.NewDocumentBuilder().AppendString("_shardsvrDropCollectionParticipant", coll)
		if d.sharded {
			b.AppendBinary("collectionUUID", 4, d.uuid[:])
		}
		if fromMigrate {
			b.AppendBoolean("fromMigrate", true)
		}
		return b.Build()
	}
	// The other shards drop first, their entries marked fromMigrate, then this one, the
	// primary: change streams see one drop, the primary's, after every other shard's events.
	if err := d.everyShard(ctx, cl, db, participant(true), true); err != nil {
		return err
	}
	cmd := participant(false)
	_, err = d.s.cfg.Local(ctx, db, cmd)
	return err
}

// block has every shard block the namespace's versioned reads and writes (a persisted
// critical section, _shardsvrParticipantBlock), so that no routed write recreates the
// collection on a shard between its drop there and the routers' refresh.
func (d *dropCollection) block(ctx context.Context) error {
	return d.participantBlock(ctx, "ReadsAndWrites")
}

// unblock has every shard refresh the namespace and release its critical section.
func (d *dropCollection) unblock(ctx context.Context) error {
	return d.participantBlock(ctx, "Unblock")
}

func (d *dropCollection) participantBlock(ctx context.Context, blockType string) error {
	cl, err := d.s.dropCluster()
	if err != nil {
		return err
	}
	db, coll, _ := strings.Cut(d.ns, ".")
	return d.everyShard(ctx, cl, db, bsoncore.NewDocumentBuilder().AppendString("_shardsvrParticipantBlock", coll).
		AppendString("blockType", blockType).AppendString("reason", "{ command: \"dropCollection\", ns: \""+d.ns+"\" }").Build(), false)
}

// everyShard runs cmd on db of every shard, this one in-process (not at all with
// othersOnly).
func (d *dropCollection) everyShard(ctx context.Context, cl dropCluster, db string, cmd bsoncore.Document, othersOnly bool) error {
	shards, err := cl.shards(ctx)
	if err != nil {
		return err
	}
	self := d.s.cfg.Self()
	for _, sh := range shards {
		if sh == self {
			if othersOnly {
				continue
			}
			if _, err := d.s.cfg.Local(ctx, db, cmd); err != nil {
				return err
			}
			continue
		}
		if err := cl.shardCommand(ctx, sh, db, appendField(cmd, "writeConcern", majority())); err != nil {
			return err
		}
	}
	return nil
}

// dropCluster is what the drop coordinator asks of the rest of the cluster: remoteCluster
// in production, the simulation's (sim_test.go) in tests.
type dropCluster interface {
	// collection is ns's config.collections entry: whether it is sharded, and its UUID.
	collection(ctx context.Context, ns string) (sharded bool, uuid catalog.UUID, err error)
	// configWrite runs a write command on the config server's config database.
	configWrite(ctx context.Context, cmd bsoncore.Document) error
	// shards lists the cluster's shards, freshly read.
	shards(ctx context.Context) ([]string, error)
	// shardCommand runs cmd on shard's primary.
	shardCommand(ctx context.Context, shard, db string, cmd bsoncore.Document) error
}

// remoteCluster is dropCluster over a Remote.
type remoteCluster struct{ r *Remote }

func (c remoteCluster) collection(ctx context.Context, ns string) (bool, catalog.UUID, error) {
	coll, _, sharded, err := c.r.Catalog.Collection(ctx, ns, nil)
	return sharded, coll.UUID, err
}

func (c remoteCluster) configWrite(ctx context.Context, cmd bsoncore.Document) error {
	_, err := writeReplyOK(Run(ctx, c.r.Config(), "config", cmd))
	return err
}

func (c remoteCluster) shards(ctx context.Context) ([]string, error) {
	if err := c.r.Shards.Reload(ctx); err != nil {
		return nil, err
	}
	all, err := c.r.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(all))
	for i, sh := range all {
		ids[i] = sh.ID
	}
	return ids, nil
}

func (c remoteCluster) shardCommand(ctx context.Context, shard, db string, cmd bsoncore.Document) error {
	rs, err := c.r.Shard(ctx, shard)
	if err != nil {
		return err
	}
	_, err = Run(ctx, rs, db, cmd)
	return err
}
