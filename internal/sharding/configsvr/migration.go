package configsvr

// The config server's commit of a chunk migration (spec: sharding.md "The live migration
// protocol", step "Commit on the config server", and the chunk version transitions; MongoDB
// 7.0's ShardingCatalogManager::commitChunkMigration): serialized with splits and merges by
// the Committer's lock, one atomic applyOps.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// MigrationRequest is _configsvrCommitChunkMigration's content.
type MigrationRequest struct {
	NS                 string
	FromShard, ToShard string
	// Min, Max and Version are migratedChunk's: the moved range (a chunk, or part of one
	// for moveRange) and the version of the chunk it is in as the donor saw it.
	Min, Max   bsoncore.Document
	Version    routing.ChunkVersion
	HasVersion bool
	// FromShardCollectionVersion's epoch and timestamp must be the collection's.
	Gen        routing.Generation
	ValidAfter bson.Timestamp
}

// historyWindowSecs is how long history entries are kept (max(minSnapshotHistoryWindow,
// transactionLifetimeLimit, 10) with their defaults: 300 and 60 s).
const historyWindowSecs = 300

// CommitMigration moves [Min, Max) from FromShard to ToShard: the migrated chunk gets the
// collection's major version + 1 (minor 0) and a history entry {validAfter, toShard}; the
// parts of the donor's chunk left on either side (moveRange) get the same major and the next
// minors; one other chunk of the donor, if any (the control chunk), gets the next minor too,
// so the donor's shard version moves past the old collection version. A retried commit
// (the range already on ToShard) answers the current versions, nothing written.
func (c *Committer) CommitMigration(ctx context.Context, req MigrationRequest) (Versions, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	coll, err := c.collection(ctx, req.NS)
	if err != nil {
		return Versions{}, err
	}
	collVersion, err := c.collectionVersion(ctx, coll)
	if err != nil {
		return Versions{}, err
	}
	if coll.Gen.Epoch != req.Gen.Epoch || coll.Gen.Timestamp != req.Gen.Timestamp {
		return Versions{}, mongoerr.Newf(mongoerr.StaleEpoch,
			"The epoch of collection '%s' has changed since the migration began. The config server's collection version epoch is now '%s', but the shard's is %s'. Aborting migration commit for chunk (%s).",
			req.NS, coll.Gen.Epoch.Hex(), req.Gen.Epoch.Hex(), rangeString(req.Min, req.Max))
	}
	if err := c.checkMigrationsAllowed(ctx, req.NS); err != nil {
		return Versions{}, err
	}
	if !req.HasVersion || !req.Version.IsSet() {
		return Versions{}, mongoerr.New(mongoerr.Code(4683300), "Config server rejecting commitChunkMigration request that does not have a ChunkVersion")
	}
	cur, err := c.chunkContaining(ctx, coll.UUID, coll.Gen, req.Min)
	if err != nil {
		return Versions{}, err
	}
	if cur == nil || bsonutil.CompareDocuments(req.Max, cur.Max) > 0 {
		return Versions{}, mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Could not find a chunk including range %s", rangeString(req.Min, req.Max))
	}
	if cur.Shard == req.ToShard {
		// Done before: the donor is retrying after losing the reply.
		shardV, err := c.shardVersion(ctx, coll, req.FromShard)
		if err != nil {
			return Versions{}, err
		}
		return Versions{Collection: collVersion, Shard: shardV}, nil
	}
	if cur.Shard != req.FromShard {
		return Versions{}, mongoerr.Newf(mongoerr.Code(4914702), "Migrated  chunk %s from ns: %s not owned by donor %s neither by recipient %s",
			rangeString(req.Min, req.Max), req.NS, req.FromShard, req.ToShard)
	}
	if req.Version.IsOlderThan(cur.Version) || !req.Version.Generation.SameCollection(cur.Version.Generation) {
		return Versions{}, mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Rejecting migration request because the version of the requested chunk %s(%s) is older than the version of the current chunk %s(%s) on shard %s",
			rangeString(req.Min, req.Max), req.Version, cur.RangeString(), cur.Version, req.FromShard)
	}
	minor := uint32(0)
	next := func() routing.ChunkVersion {
		v := collVersion
		v.Major, v.Minor = collVersion.Major+1, minor
		minor++
		return v
	}
	moved := *cur
	moved.Min, moved.Max, moved.Shard, moved.Version = req.Min, req.Max, req.ToShard, next()
	hist := append([]routing.HistoryEntry(nil), cur.History...)
	for len(hist) > 1 && hist[len(hist)-1].ValidAfter.T+historyWindowSecs < req.ValidAfter.T {
		hist = hist[:len(hist)-1]
	}
	if len(hist) > 0 && !tsBefore(hist[0].ValidAfter, req.ValidAfter) {
		return Versions{}, mongoerr.Newf(mongoerr.IncompatibleShardingMetadata,
			"The chunk history for chunk with namespace %s and min key %s is corrupted. The last validAfter Timestamp(%d, %d) is greater or equal to the new validAfter Timestamp(%d, %d)",
			req.NS, bsonutil.FormatDoc(req.Min), hist[0].ValidAfter.T, hist[0].ValidAfter.I, req.ValidAfter.T, req.ValidAfter.I)
	}
	moved.History = append([]routing.HistoryEntry{{ValidAfter: req.ValidAfter, Shard: req.ToShard}}, hist...)
	since := req.ValidAfter
	moved.OnCurrentShardSince = &since
	ops := []bsoncore.Document{updateOp("config.chunks", cur.ID, moved.ConfigDoc())}
	if bsonutil.CompareDocuments(req.Min, cur.Min) != 0 {
		left := *cur
		left.ID, left.Max, left.Version = bson.NewObjectID(), req.Min, next()
		ops = append(ops, insertOp("config.chunks", left.ConfigDoc()))
	}
	if bsonutil.CompareDocuments(req.Max, cur.Max) != 0 {
		right := *cur
		right.ID, right.Min, right.Version = bson.NewObjectID(), req.Max, next()
		ops = append(ops, insertOp("config.chunks", right.ConfigDoc()))
	}
	control, err := c.controlChunk(ctx, coll.UUID, coll.Gen, req.FromShard, cur.Min)
	if err != nil {
		return Versions{}, err
	}
	var vs Versions
	if control != nil {
		control.Version = next()
		ops = append(ops, updateOp("config.chunks", control.ID, control.ConfigDoc()))
		vs = Versions{Collection: control.Version, Shard: control.Version}
	} else if len(ops) > 1 {
		// The donor keeps the sides of its chunk: its version is theirs.
		v := moved.Version
		v.Minor = minor - 1
		vs = Versions{Collection: v, Shard: v}
	} else {
		// The donor's last chunk left it.
		donor := collVersion
		donor.Major, donor.Minor = 0, 0
		vs = Versions{Collection: moved.Version, Shard: donor}
	}
	if err := c.apply(ctx, ops); err != nil {
		return Versions{}, err
	}
	return vs, nil
}

func tsBefore(a, b bson.Timestamp) bool { return a.T < b.T || a.T == b.T && a.I < b.I }

// chunkContaining reads the collection's chunk whose range contains key (nil: none).
func (c *Committer) chunkContaining(ctx context.Context, uuid [16]byte, gen routing.Generation, key bsoncore.Document) (*routing.Chunk, error) {
	filter := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, uuid[:]).
		AppendDocument("min", bsoncore.NewDocumentBuilder().AppendDocument("$lte", key).Build()).Build()
	doc, found, err := findOne(ctx, c.Run, "chunks", filter, bsoncore.NewDocumentBuilder().AppendInt32("min", -1).Build())
	if err != nil || !found {
		return nil, err
	}
	ch, err := routing.ParseConfigChunk(doc, gen)
	if err != nil {
		return nil, err
	}
	if bsonutil.CompareDocuments(key, ch.Max) >= 0 {
		return nil, nil
	}
	return &ch, nil
}

// controlChunk is getControlChunkForMigrate: a chunk of shard other than the one at
// migratedMin (nil: none).
func (c *Committer) controlChunk(ctx context.Context, uuid [16]byte, gen routing.Generation, shard string, migratedMin bsoncore.Document) (*routing.Chunk, error) {
	filter := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, uuid[:]).AppendString("shard", shard).
		AppendDocument("min", bsoncore.NewDocumentBuilder().AppendDocument("$ne", migratedMin).Build()).Build()
	doc, found, err := findOne(ctx, c.Run, "chunks", filter, nil)
	if err != nil || !found {
		return nil, err
	}
	ch, err := routing.ParseConfigChunk(doc, gen)
	if err != nil {
		return nil, err
	}
	return &ch, nil
}

// defaultChunkSizeMB is config.settings' chunksize default (MongoDB 7.0: 128 MB).
const defaultChunkSizeMB = 128

// MoveTarget is what _configsvrMoveRange needs to forward a move to the donor.
type MoveTarget struct {
	Gen               routing.Generation
	Pattern           bsoncore.Document
	Chunk             routing.Chunk
	MaxChunkSizeBytes int64
}

// MoveRangeTarget reads ns's chunk containing min and the chunk size that applies to it
// (config.collections' maxChunkSizeBytes, else config.settings' chunksize, else 128 MB).
func (c *Committer) MoveRangeTarget(ctx context.Context, ns string, min bsoncore.Document) (MoveTarget, error) {
	coll, err := c.collection(ctx, ns)
	if err != nil {
		return MoveTarget{}, err
	}
	if !coll.Pattern.IsShardKey(min) {
		return MoveTarget{}, mongoerr.Newf(mongoerr.InvalidOptions, "shard key bounds [%s, ...) are not valid for shard key pattern %s",
			bsonutil.FormatDoc(min), coll.Pattern)
	}
	ch, err := c.chunkContaining(ctx, coll.UUID, coll.Gen, min)
	if err != nil {
		return MoveTarget{}, err
	}
	if ch == nil {
		return MoveTarget{}, mongoerr.Newf(mongoerr.ConflictingOperationInProgress, "Could not find a chunk including key %s", bsonutil.FormatDoc(min))
	}
	t := MoveTarget{Gen: coll.Gen, Pattern: coll.Pattern.Doc(), Chunk: *ch, MaxChunkSizeBytes: defaultChunkSizeMB << 20}
	collDoc, _, err := findOne(ctx, c.Run, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build(), nil)
	if err != nil {
		return MoveTarget{}, err
	}
	if v, ok := collDoc.Lookup("maxChunkSizeBytes").AsInt64OK(); ok && v > 0 {
		t.MaxChunkSizeBytes = v
		return t, nil
	}
	settings, found, err := findOne(ctx, c.Run, "settings", bsoncore.NewDocumentBuilder().AppendString("_id", "chunksize").Build(), nil)
	if err != nil {
		return MoveTarget{}, err
	}
	if found {
		if mb, ok := settings.Lookup("value").AsFloat64OK(); ok && mb > 0 {
			t.MaxChunkSizeBytes = int64(mb * (1 << 20))
		}
	}
	return t, nil
}

// EnsureChunkVersionIsGreaterThan is MongoDB's ShardingCatalogManager::
// ensureChunkVersionIsGreaterThan, run by a donor that decides a migration whose commit may
// still be on its way here: the chunk holding [min, max) of collection uuid, if it is still
// at version v or older (the migration did not commit, nothing else changed it), gets a new
// major version. A late commit of the migration then fails its version check. Anything else
// (the collection gone or recreated, the chunk split, merged or moved since) is a no-op:
// the change that did it already ended the migration's chance to commit.
func (c *Committer) EnsureChunkVersionIsGreaterThan(ctx context.Context, ns string, uuid [16]byte, min, max bsoncore.Document, v routing.ChunkVersion) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	coll, err := c.collection(ctx, ns)
	if mongoerr.Is(err, mongoerr.NamespaceNotSharded) {
		return nil
	}
	if err != nil {
		return err
	}
	if coll.UUID != uuid || !coll.Gen.SameCollection(v.Generation) {
		return nil
	}
	cur, err := c.chunkContaining(ctx, coll.UUID, coll.Gen, min)
	if err != nil || cur == nil {
		return err
	}
	if bsonutil.CompareDocuments(cur.Min, min) > 0 || bsonutil.CompareDocuments(max, cur.Max) > 0 || v.IsOlderThan(cur.Version) {
		return nil
	}
	collVersion, err := c.collectionVersion(ctx, coll)
	if err != nil {
		return err
	}
	bumped := *cur
	bumped.Version = collVersion
	bumped.Version.Major, bumped.Version.Minor = collVersion.Major+1, 0
	return c.apply(ctx, []bsoncore.Document{updateOp("config.chunks", cur.ID, bumped.ConfigDoc())})
}

// checkMigrationsAllowed refuses a commit while a DDL coordinator (rename, drop) has stopped
// the collection's migrations (config.collections allowMigrations: false, MongoDB's
// setAllowMigrations): the DDL's participants must not see chunks move under them.
func (c *Committer) checkMigrationsAllowed(ctx context.Context, ns string) error {
	doc, found, err := findOne(ctx, c.Run, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build(), nil)
	if err != nil || !found {
		return err
	}
	if allowed, ok := doc.Lookup("allowMigrations").BooleanOK(); ok && !allowed {
		return mongoerr.New(mongoerr.ConflictingOperationInProgress, "Collection is undergoing changes so moveChunk is not allowed.")
	}
	return nil
}

// SetAllowMigrations sets or clears ns's allowMigrations: false (MongoDB's
// _configsvrSetAllowMigrations), under the commit lock so that no migration commit that
// checked the flag before it is still in flight once it returns. uuid, when set, must be
// the collection's (the DDL stops migrations of the incarnation it works on).
// A namespace that is not sharded is NamespaceNotSharded.
func (c *Committer) SetAllowMigrations(ctx context.Context, ns string, uuid *[16]byte, allow bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := bsoncore.NewDocumentBuilder().AppendString("_id", ns)
	if uuid != nil {
		q.AppendBinary("uuid", 4, uuid[:])
	}
	u := bsoncore.NewDocumentBuilder()
	if allow {
		u.AppendDocument("$unset", bsoncore.NewDocumentBuilder().AppendString("allowMigrations", "").Build())
	} else {
		u.AppendDocument("$set", bsoncore.NewDocumentBuilder().AppendBoolean("allowMigrations", false).Build())
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("update", "collections").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", q.Build()).AppendDocument("u", u.Build()).Build()).Build()).Build()
	reply, err := c.Run(ctx, "config", cmd)
	if err != nil {
		return err
	}
	if err := WriteReplyError(reply); err != nil {
		return err
	}
	if n, _ := reply.Lookup("n").AsInt64OK(); n == 0 {
		return mongoerr.Newf(mongoerr.NamespaceNotSharded, "Collection %s is not sharded.", ns)
	}
	return nil
}
