package ddl

// The rename-collection coordinator (MongoDB 7.0's RenameCollectionCoordinator, spec:
// sharding.md "Sharding DDL Coordinator"): renameCollection of a sharded or unsharded
// collection, onto a sharded or unsharded target, on the database's primary shard, resumably.
// Phases, each checkpointed (majority) before it runs and idempotent:
//
//   - checkPreconditions: what the source and the target are (config.collections, this
//     shard's catalog), MongoDB's refusals, and the migrations of both stopped
//     (allowMigrations: false); recorded in the state document with the next checkpoint, so
//     a resumed coordinator renames that incarnation (by UUID) and never one created later;
//   - blockCRUDAndRename: every shard enters the critical section of both namespaces
//     (versioned reads and writes wait), drops its copy of the target and renames its copy
//     of the source (_shardsvrRenameCollectionParticipant); a shard whose target already
//     has the source's UUID did it before;
//   - renameMetadata: the config server's entry moves to the new name with a new epoch and
//     timestamp (routers see a new incarnation and reload), the target's stale metadata and
//     zones go, the source's zones follow it;
//   - unblockCRUD: every shard refreshes both namespaces and leaves the critical sections
//     (_shardsvrRenameCollectionUnblockParticipant).
//
// A refusal in checkPreconditions ends the operation with nothing changed. The participants
// persist their critical sections (config.collection_critical_sections, MongoDB's
// recoverable critical sections): a participant that restarts mid-rename blocks both
// namespaces again before it takes writes, until the resumed coordinator unblocks it.

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/configsvr"
)

const opRenameCollection = "renameCollection"

// RenameRequest is _shardsvrRenameCollection's content.
type RenameRequest struct {
	From, To   string
	DropTarget bool
	StayTemp   bool
}

// RenameCollection renames req.From through its coordinator on this shard, the source
// database's primary shard (an identical request joins a running one), and waits for its
// end.
func (s *CoordinatorService) RenameCollection(ctx context.Context, req RenameRequest) error {
	db, _, _ := strings.Cut(req.From, ".")
	_, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().AppendDocument("_id", coordinatorDocID(req.From, opRenameCollection)).
		AppendString("to", req.To).AppendBoolean("dropTarget", req.DropTarget).AppendBoolean("stayTemp", req.StayTemp).Build())
	return err
}

type renameCollection struct {
	coordinator
	req RenameRequest
	// What checkPreconditions found.
	sourceDoc  bsoncore.Document // the source's config.collections entry (nil: unsharded)
	sourceUUID catalog.UUID
	targetUUID catalog.UUID // the sharded target's (zero: the target is not sharded)
}

func newRenameCollection(s *CoordinatorService, doc bsoncore.Document) (*renameCollection, error) {
	doc = append(bsoncore.Document(nil), doc...)
	id, _ := doc.Lookup("_id").DocumentOK()
	var req RenameRequest
	req.From, _ = id.Lookup("namespace").StringValueOK()
	req.To, _ = doc.Lookup("to").StringValueOK()
	req.DropTarget, _ = doc.Lookup("dropTarget").BooleanOK()
	req.StayTemp, _ = doc.Lookup("stayTemp").BooleanOK()
	fromDB, _, _ := strings.Cut(req.From, ".")
	toDB, _, _ := strings.Cut(req.To, ".")
	r := &renameCollection{coordinator: newCoordinator(s, doc, []string{fromDB, toDB}, []string{req.From, req.To}), req: req}
	r.sourceDoc, _ = doc.Lookup("sourceCollection").DocumentOK()
	r.sourceUUID = uuidField(doc, "sourceUUID")
	r.targetUUID = uuidField(doc, "targetUUID")
	return r, nil
}

func uuidField(doc bsoncore.Document, f string) catalog.UUID {
	var u catalog.UUID
	if sub, data, ok := doc.Lookup(f).BinaryOK(); ok && sub == 4 && len(data) == 16 {
		copy(u[:], data)
	}
	return u
}

// CheckJoin: a rename of the same source joins only with the same target and options.
func (r *renameCollection) CheckJoin(doc bsoncore.Document) error {
	to, _ := doc.Lookup("to").StringValueOK()
	dt, _ := doc.Lookup("dropTarget").BooleanOK()
	st, _ := doc.Lookup("stayTemp").BooleanOK()
	if to != r.req.To || dt != r.req.DropTarget || st != r.req.StayTemp {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Another rename collection for namespace %s with different arguments is already running", r.req.From)
	}
	return nil
}

func (r *renameCollection) Run(ctx context.Context) error {
	return r.run(ctx, opRenameCollection, []primaryonly.Phase{
		{Name: "checkPreconditions", Run: r.checkPreconditions},
		{Name: "blockCRUDAndRename", Run: r.s.retryingAll(r.req.From, opRenameCollection, r.renameParticipants)},
		{Name: "renameMetadata", Run: r.s.retryingAll(r.req.From, opRenameCollection, r.renameMetadata)},
		{Name: "unblockCRUD", Run: r.s.retryingAll(r.req.From, opRenameCollection, r.unblockParticipants)},
	}, r.checkpoint, "checkPreconditions")
}

func (r *renameCollection) checkpoint(ctx context.Context, phase string) error {
	if phase == "checkPreconditions" {
		return r.checkpointPhase(ctx, phase, nil)
	}
	return r.checkpointPhase(ctx, phase, func(set *bsoncore.DocumentBuilder) {
		if r.sourceDoc != nil {
			set.AppendDocument("sourceCollection", r.sourceDoc)
		}
		set.AppendBinary("sourceUUID", 4, r.sourceUUID[:]).AppendBinary("targetUUID", 4, r.targetUUID[:])
	})
}

// checkPreconditions is MongoDB's kCheckPreconditionsAndFreezeMigrations, with its errors.
func (r *renameCollection) checkPreconditions(ctx context.Context) error {
	from, to := r.req.From, r.req.To
	if from == to {
		return mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	remote, err := r.s.cfg.Remote()
	if err != nil {
		return err
	}
	fromDB, fromColl, _ := strings.Cut(from, ".")
	toDB, toColl, _ := strings.Cut(to, ".")
	source, err := configCollectionDoc(ctx, remote, from)
	if err != nil {
		return err
	}
	if source != nil {
		if fromDB != toDB {
			return mongoerr.Newf(mongoerr.CommandFailed,
				"Source and destination collections must be on the same database because %s is sharded.", from)
		}
		r.sourceUUID = uuidField(source, "uuid")
	} else {
		local, err := LocalCollection(ctx, r.s.cfg.Local, fromDB, fromColl)
		if err != nil {
			return err
		}
		if !local.Exists() || local.isView {
			return mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s doesn't exist.", from)
		}
		if fromDB != toDB {
			toEntry, err := remote.Catalog.Database(ctx, toDB)
			if err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
				return err
			}
			if err != nil || toEntry.Primary != r.s.cfg.Self() {
				return mongoerr.New(mongoerr.CommandFailed, "Source and destination collections must be on same shard")
			}
		}
		r.sourceUUID = local.UUID()
	}
	targetLocal, err := LocalCollection(ctx, r.s.cfg.Local, toDB, toColl)
	if err != nil {
		return err
	}
	if targetLocal.isView {
		return mongoerr.Newf(mongoerr.CommandNotSupportedOnView, "Can't rename to target collection `%s` because it is a view.", to)
	}
	target, err := configCollectionDoc(ctx, remote, to)
	if err != nil {
		return err
	}
	if !r.req.DropTarget {
		if target != nil {
			return mongoerr.Newf(mongoerr.NamespaceExists, "Sharded target collection %s exists but dropTarget is not set", to)
		}
		if targetLocal.Exists() {
			return mongoerr.Newf(mongoerr.NamespaceExists, "Target collection %s exists but dropTarget is not set", to)
		}
	}
	tags, err := configsvr.FindAll(ctx, remoteRun(remote), "tags", bsoncore.NewDocumentBuilder().AppendString("ns", to).Build(), nil)
	if err != nil {
		return err
	}
	if len(tags) > 0 {
		return mongoerr.Newf(mongoerr.CommandFailed, "Can't rename to target collection %s because it must not have associated tags", to)
	}
	if target != nil {
		r.targetUUID = uuidField(target, "uuid")
	}
	// The checks passed: from here on the rename happens. Migrations of both stop.
	if source != nil {
		if err := setAllowMigrations(ctx, remote, from, r.sourceUUID, false); err != nil {
			return err
		}
	}
	if target != nil {
		if err := setAllowMigrations(ctx, remote, to, r.targetUUID, false); err != nil {
			return err
		}
	}
	r.sourceDoc = source
	return nil
}

// participants sends cmd (on the source's database) to every shard: moves and movePrimary
// leave copies behind, so every shard takes part, as in MongoDB.
func (r *renameCollection) participants(ctx context.Context, cmd bsoncore.Document) error {
	db, _, _ := strings.Cut(r.req.From, ".")
	return r.s.everyShard(ctx, db, cmd)
}

func (r *renameCollection) renameParticipants(ctx context.Context) error {
	if err := fpRenameHangBeforeRename.PauseWhileSet(ctx); err != nil {
		return err
	}
	_, coll, _ := strings.Cut(r.req.From, ".")
	return r.participants(ctx, bsoncore.NewDocumentBuilder().AppendString("_shardsvrRenameCollectionParticipant", coll).
		AppendString("to", r.req.To).AppendBoolean("dropTarget", r.req.DropTarget).
		AppendBinary("sourceUUID", 4, r.sourceUUID[:]).Build())
}

func (r *renameCollection) unblockParticipants(ctx context.Context) error {
	_, coll, _ := strings.Cut(r.req.From, ".")
	return r.participants(ctx, bsoncore.NewDocumentBuilder().AppendString("_shardsvrRenameCollectionUnblockParticipant", coll).
		AppendString("to", r.req.To).Build())
}

// renameMetadata is MongoDB's shardedRenameMetadata (or, for an unsharded source onto a
// sharded target, the target's removal), as idempotent steps: the target entry holding the
// source's UUID means it is done.
func (r *renameCollection) renameMetadata(ctx context.Context) error {
	if err := fpRenameHangAfterRename.PauseWhileSet(ctx); err != nil {
		return err
	}
	remote, err := r.s.cfg.Remote()
	if err != nil {
		return err
	}
	from, to := r.req.From, r.req.To
	target, err := configCollectionDoc(ctx, remote, to)
	if err != nil {
		return err
	}
	if target != nil && r.sourceDoc != nil && uuidField(target, "uuid") == r.sourceUUID {
		return nil
	}
	if target != nil {
		// The dropped target's entry, chunks and zones.
		tu := uuidField(target, "uuid")
		if err := configDeleteMany(ctx, remote, "chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, tu[:]).Build()); err != nil {
			return err
		}
		if err := configDeleteMany(ctx, remote, "tags", bsoncore.NewDocumentBuilder().AppendString("ns", to).Build()); err != nil {
			return err
		}
		if err := configDeleteMany(ctx, remote, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", to).AppendBinary("uuid", 4, tu[:]).Build()); err != nil {
			return err
		}
	}
	if r.sourceDoc == nil {
		return nil
	}
	// The source's zones follow it, then its entry moves: a new epoch and timestamp, so
	// every router and shard sees a new incarnation, and migrations allowed again.
	upd := bsoncore.NewDocumentBuilder().AppendString("update", "tags").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendString("ns", from).Build()).
			AppendDocument("u", bsoncore.NewDocumentBuilder().AppendDocument("$set",
				bsoncore.NewDocumentBuilder().AppendString("ns", to).Build()).Build()).
			AppendBoolean("multi", true).Build()).Build()).
		AppendDocument("writeConcern", majority()).Build()
	if _, err := writeReplyOK(Run(ctx, remote.Config(), "config", upd)); err != nil {
		return err
	}
	if err := configDeleteMany(ctx, remote, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", from).
		AppendBinary("uuid", 4, r.sourceUUID[:]).Build()); err != nil {
		return err
	}
	ts := clusterTime(ctx, remote)
	b := bsoncore.NewDocumentBuilder().AppendString("_id", to)
	elems, _ := r.sourceDoc.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "_id", "lastmodEpoch", "lastmod", "timestamp", "allowMigrations":
		default:
			b.AppendValue(e.Key(), e.Value())
		}
	}
	b.AppendObjectID("lastmodEpoch", bson.NewObjectID()).AppendDateTime("lastmod", time.Now().UnixMilli()).
		AppendTimestamp("timestamp", ts.T, ts.I)
	ins := bsoncore.NewDocumentBuilder().AppendString("insert", "collections").
		AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(b.Build()).Build()).
		AppendDocument("writeConcern", majority()).Build()
	_, err = writeReplyOK(Run(ctx, remote.Config(), "config", ins))
	return err
}

// configCollectionDoc reads ns's config.collections entry (nil: not sharded).
func configCollectionDoc(ctx context.Context, remote *Remote, ns string) (bsoncore.Document, error) {
	docs, err := configsvr.FindAll(ctx, remoteRun(remote), "collections", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build(), nil)
	if err != nil || len(docs) == 0 {
		return nil, err
	}
	return docs[0], nil
}

// remoteRun runs commands on the config server's primary with majority reads, the
// coordinator's view of the catalog.
func remoteRun(remote *Remote) configsvr.RunFunc {
	return func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
		if _, ok := cmd.Lookup("find").StringValueOK(); ok {
			cmd = appendField(cmd, "readConcern", bsoncore.NewDocumentBuilder().AppendString("level", "majority").Build())
		}
		return Run(ctx, remote.Config(), db, cmd)
	}
}

func configDeleteMany(ctx context.Context, remote *Remote, coll string, q bsoncore.Document) error {
	cmd := bsoncore.NewDocumentBuilder().AppendString("delete", coll).
		AppendArray("deletes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", q).AppendInt32("limit", 0).Build()).Build()).
		AppendDocument("writeConcern", majority()).Build()
	_, err := writeReplyOK(Run(ctx, remote.Config(), "config", cmd))
	return err
}

// setAllowMigrations stops (or resumes) the migrations of the incarnation uuid of ns on the
// config server; a namespace no longer sharded is fine.
func setAllowMigrations(ctx context.Context, remote *Remote, ns string, uuid catalog.UUID, allow bool) error {
	cmd := bsoncore.NewDocumentBuilder().AppendString("_configsvrSetAllowMigrations", ns).
		AppendBoolean("allowMigrations", allow).AppendBinary("collectionUUID", 4, uuid[:]).
		AppendDocument("writeConcern", majority()).Build()
	_, err := Run(ctx, remote.Config(), "admin", cmd)
	if mongoerr.Is(err, mongoerr.NamespaceNotSharded) {
		return nil
	}
	return err
}
