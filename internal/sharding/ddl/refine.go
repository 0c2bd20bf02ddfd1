package ddl

// The refine-shard-key coordinator (MongoDB 7.0's RefineCollectionShardKeyCoordinator, spec:
// sharding.md "Sharding DDL Coordinator"): refineCollectionShardKey adds suffix fields to a
// collection's shard key. Phases:
//
//   - checkPreconditions: the collection is sharded, the new key extends its key, and every
//     shard that owns chunks has an index that can back the new key (refine never creates
//     one); its migrations stop and the new generation (epoch, timestamp) is chosen and
//     recorded with the next checkpoint, so a resumed commit writes the same one;
//   - commit: the config server's entry gets the key and generation, every chunk and zone
//     bound the new fields (_configsvrCommitRefineCollectionShardKey; idempotent);
//   - refreshShards: every shard reloads the collection's metadata.

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

const opRefineShardKey = "refineCollectionShardKey"

// RefineShardKey refines ns's shard key to key through its coordinator on this shard, the
// database's primary shard, and waits for its end.
func (s *CoordinatorService) RefineShardKey(ctx context.Context, ns string, key bsoncore.Document) error {
	db, _, _ := strings.Cut(ns, ".")
	_, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(ns, opRefineShardKey)).AppendDocument("newShardKey", key).Build())
	return err
}

type refineShardKey struct {
	coordinator
	key bsoncore.Document
	// What checkPreconditions chose: the incarnation and the new generation (Epoch zero:
	// the key is already the new one, nothing to do).
	uuid catalog.UUID
	gen  routing.Generation
}

func newRefineShardKey(s *CoordinatorService, doc bsoncore.Document) (*refineShardKey, error) {
	doc = append(bsoncore.Document(nil), doc...)
	id, _ := doc.Lookup("_id").DocumentOK()
	ns, _ := id.Lookup("namespace").StringValueOK()
	db, _, _ := strings.Cut(ns, ".")
	r := &refineShardKey{coordinator: newCoordinator(s, doc, []string{db}, []string{ns})}
	r.key, _ = doc.Lookup("newShardKey").DocumentOK()
	r.uuid = uuidField(doc, "collectionUUID")
	if oid, ok := doc.Lookup("epoch").ObjectIDOK(); ok {
		r.gen.Epoch = oid
	}
	if t, i, ok := doc.Lookup("timestamp").TimestampOK(); ok {
		r.gen.Timestamp = bson.Timestamp{T: t, I: i}
	}
	return r, nil
}

func (r *refineShardKey) CheckJoin(doc bsoncore.Document) error {
	if key, _ := doc.Lookup("newShardKey").DocumentOK(); bsonutil.CompareDocuments(key, r.key) != 0 {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Another refineCollectionShardKey with different arguments is already running for the same namespace %s", r.ns)
	}
	return nil
}

func (r *refineShardKey) Run(ctx context.Context) error {
	return r.run(ctx, opRefineShardKey, []primaryonly.Phase{
		{Name: "checkPreconditions", Run: r.checkPreconditions},
		{Name: "commit", Run: r.s.retryingAll(r.ns, opRefineShardKey, r.commit)},
		{Name: "refreshShards", Run: r.s.retryingAll(r.ns, opRefineShardKey, r.refresh)},
	}, r.checkpoint, "checkPreconditions")
}

func (r *refineShardKey) checkpoint(ctx context.Context, phase string) error {
	if phase == "checkPreconditions" {
		return r.checkpointPhase(ctx, phase, nil)
	}
	return r.checkpointPhase(ctx, phase, func(set *bsoncore.DocumentBuilder) {
		set.AppendBinary("collectionUUID", 4, r.uuid[:]).AppendObjectID("epoch", r.gen.Epoch).
			AppendTimestamp("timestamp", r.gen.Timestamp.T, r.gen.Timestamp.I)
	})
}

// checkPreconditions is configsvrRefineCollectionShardKey's validation, with its errors.
func (r *refineShardKey) checkPreconditions(ctx context.Context) error {
	newKey, err := shardkey.Parse(r.key)
	if err != nil {
		return err
	}
	remote, err := r.s.cfg.Remote()
	if err != nil {
		return err
	}
	coll, chunks, sharded, err := remote.Catalog.Collection(ctx, r.ns, nil)
	if err != nil {
		return err
	}
	if !sharded {
		return mongoerr.Newf(mongoerr.NamespaceNotSharded, "refineCollectionShardKey namespace %s is not sharded", r.ns)
	}
	r.uuid = coll.UUID
	if bsonutil.CompareDocuments(coll.Pattern.Doc(), newKey.Doc()) == 0 {
		return nil // the key already: a success with nothing to do
	}
	if !extends(coll.Pattern.Doc(), newKey.Doc()) {
		return mongoerr.Newf(mongoerr.InvalidOptions, "refineCollectionShardKey shard key %s does not extend the current shard key %s",
			newKey, coll.Pattern)
	}
	rt, err := routing.New(coll.UUID, coll.Pattern, coll.Gen, chunks)
	if err != nil {
		return err
	}
	db, collName, _ := strings.Cut(r.ns, ".")
	for _, shard := range rt.Shards() {
		run := r.s.cfg.Local
		if shard != r.s.cfg.Self() {
			rs, err := remote.Shard(ctx, shard)
			if err != nil {
				return err
			}
			run = func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
				return Run(ctx, rs, db, cmd)
			}
		}
		docs, err := cursorAll(ctx, run, db, collName, bsoncore.NewDocumentBuilder().AppendString("listIndexes", collName).Build())
		if err != nil {
			return err
		}
		specs := make([]IndexSpec, len(docs))
		for i, d := range docs {
			specs[i] = ParseIndexSpec(d)
		}
		// empty: false, so a missing index is an error and never created.
		if _, err := CheckIndexes(r.ns, newKey, coll.Unique, specs, false, false, false); err != nil {
			return err
		}
	}
	if err := setAllowMigrations(ctx, remote, r.ns, r.uuid, false); err != nil {
		return err
	}
	r.gen = routing.Generation{Epoch: bson.NewObjectID(), Timestamp: clusterTime(ctx, remote)}
	return nil
}

// extends reports whether key starts with every field of old, with the same values.
func extends(old, key bsoncore.Document) bool {
	oe, _ := old.Elements()
	ke, _ := key.Elements()
	if len(ke) <= len(oe) {
		return false
	}
	for i, e := range oe {
		if e.Key() != ke[i].Key() || bsonutil.Compare(e.Value(), ke[i].Value()) != 0 {
			return false
		}
	}
	return true
}

func (r *refineShardKey) commit(ctx context.Context) error {
	if r.gen.Epoch.IsZero() {
		return nil
	}
	remote, err := r.s.cfg.Remote()
	if err != nil {
		return err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("_configsvrCommitRefineCollectionShardKey", r.ns).
		AppendDocument("key", r.key).AppendBinary("collectionUUID", 4, r.uuid[:]).
		AppendObjectID("epoch", r.gen.Epoch).AppendTimestamp("timestamp", r.gen.Timestamp.T, r.gen.Timestamp.I).
		AppendDocument("writeConcern", majority()).Build()
	_, err = Run(ctx, remote.Config(), "admin", cmd)
	return err
}

func (r *refineShardKey) refresh(ctx context.Context) error {
	return r.s.everyShard(ctx, "admin", bsoncore.NewDocumentBuilder().AppendString("_flushRoutingTableCacheUpdates", r.ns).Build())
}
