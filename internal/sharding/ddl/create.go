package ddl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// CreateRequest is _shardsvrCreateCollection's content (ShardsvrCreateCollectionRequest).
type CreateRequest struct {
	NS               string
	Key              bsoncore.Document
	Unique           bool
	NumInitialChunks int64
	Presplit         bool
	Collation        bsoncore.Document // nil when not given
}

// ParseCreateRequest reads {_shardsvrCreateCollection: coll, shardKey, unique,
// numInitialChunks, presplitHashedZones, collation, timeseries, $db}. Time-series
// collections are refused: sharding them is not supported here.
func ParseCreateRequest(db string, cmd bsoncore.Document) (CreateRequest, error) {
	var r CreateRequest
	coll, ok := cmd.Index(0).Value().StringValueOK()
	if !ok || coll == "" {
		return r, mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified for _shardsvrCreateCollection")
	}
	r.NS = db + "." + coll
	if v, err := cmd.LookupErr("timeseries"); err == nil && v.Type != bsoncore.TypeNull {
		return r, mongoerr.New(mongoerr.CommandNotSupported, "sharding a time-series collection is not supported by humongo")
	}
	key, ok := cmd.Lookup("shardKey").DocumentOK()
	if !ok {
		return r, mongoerr.New(mongoerr.InvalidOptions, "_shardsvrCreateCollection requires a shardKey")
	}
	r.Key = key
	r.Unique = truthy(cmd.Lookup("unique"))
	r.Presplit = truthy(cmd.Lookup("presplitHashedZones"))
	if v, err := cmd.LookupErr("numInitialChunks"); err == nil {
		n, ok := v.AsInt64OK()
		if !ok {
			return r, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'numInitialChunks' is the wrong type '%s', expected types '[long, int, decimal, double']", typeName(v.Type))
		}
		r.NumInitialChunks = n
	}
	if v, err := cmd.LookupErr("collation"); err == nil {
		c, ok := v.DocumentOK()
		if !ok {
			return r, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'collation' is the wrong type '%s', expected type 'object'", typeName(v.Type))
		}
		r.Collation = c
	}
	return r, nil
}

func typeName(t bsoncore.Type) string {
	return strings.ToLower(t.String())
}

// CreateResponse is CreateCollectionResponse: the collection version and UUID.
type CreateResponse struct {
	UUID              catalog.UUID
	CollectionVersion routing.ChunkVersion
}

// Doc renders the response as a shard's reply fields.
func (r CreateResponse) Doc() bsoncore.Document {
	b := r.CollectionVersion.AppendShardVersion(nil, "collectionVersion")
	d := bsoncore.NewDocumentBuilder().AppendBinary("collectionUUID", 4, r.UUID[:]).Build()
	out := append(append([]byte(nil), d[:len(d)-1]...), b...)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// Coordinator runs a shard's sharding DDL (one operation at a time: a non-resumable stand-in
// for 7.0's per-namespace DDL locks and coordinators).
type Coordinator struct {
	Local  RunFunc
	Remote func() (*Remote, error)
	// DatabaseSections is the shard's database critical sections (movePrimary's).
	DatabaseSections func() (DatabaseCriticalSection, error)
	// LogEvent writes the no-op oplog entry {ns, ui, o: {msg: {<op>: ns}}, o2: desc} that
	// change streams report as a DDL event (desc's first field names it: shardCollection).
	// Nil: none is written.
	LogEvent func(ctx context.Context, ns string, desc bsoncore.Document) error

	mu sync.Mutex
}

// CreateCollection shards req.NS (the database's primary shard runs it).
//
// self is this shard's id (its shardIdentity shardName).
func (c *Coordinator) CreateCollection(ctx context.Context, self string, req CreateRequest) (CreateResponse, error) {
	p, err := shardkey.Parse(req.Key)
	if err != nil {
		return CreateResponse{}, err
	}
	if err := p.CheckUnique(req.Unique); err != nil {
		return CreateResponse{}, err
	}
	if req.Collation != nil && !IsSimpleCollation(req.Collation) {
		return CreateResponse{}, mongoerr.Newf(mongoerr.BadValue,
			"The collation for shardCollection must be {locale: 'simple'}, but found: %s", fmtDoc(req.Collation))
	}
	remote, err := c.Remote()
	if err != nil {
		return CreateResponse{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	db, coll, _ := strings.Cut(req.NS, ".")

	dbEntry, err := remote.Catalog.Database(ctx, db)
	if err != nil {
		return CreateResponse{}, err
	}
	if dbEntry.Primary != self {
		return CreateResponse{}, mongoerr.Newf(mongoerr.StaleDbVersion,
			"the primary shard of database %s is %s, not this shard (%s)", db, dbEntry.Primary, self)
	}

	// Already sharded: the same options are a success, others AlreadyInitialized.
	existing, chunks, sharded, err := remote.Catalog.Collection(ctx, req.NS, nil)
	if err != nil {
		return CreateResponse{}, err
	}

	local, err := c.localCollection(ctx, db, coll)
	if err != nil {
		return CreateResponse{}, err
	}
	if local.isView {
		return CreateResponse{}, mongoerr.New(mongoerr.CommandNotSupportedOnView, "Namespace "+req.NS+" is a view, not a collection")
	}
	if req.Collation == nil && local.defaultCollation != nil {
		return CreateResponse{}, mongoerr.Newf(mongoerr.BadValue,
			"Collection has default collation: %s. Must specify collation {locale: 'simple'}", fmtDoc(local.defaultCollation))
	}
	if sharded {
		if string(existing.Pattern.Doc()) != string(p.Doc()) || existing.Unique != req.Unique {
			return CreateResponse{}, mongoerr.Newf(mongoerr.AlreadyInitialized, "sharding already enabled for collection %s", req.NS)
		}
		rt, err := routing.New(existing.UUID, existing.Pattern, existing.Gen, chunks)
		if err != nil {
			return CreateResponse{}, err
		}
		if err := c.refreshShards(ctx, remote, self, rt.Shards(), req.NS); err != nil {
			return CreateResponse{}, err
		}
		// A commit before a failover may have left this shard's critical section held.
		if err := c.criticalSection(ctx, req.NS, "Unblock"); err != nil {
			return CreateResponse{}, err
		}
		return CreateResponse{UUID: existing.UUID, CollectionVersion: rt.Version()}, nil
	}

	// The collection's zones must be ranges of the proposed key (7.0 reads and validates
	// them before it creates anything).
	zones, zoneShards, err := LoadZones(ctx, remote, req.NS)
	if err != nil {
		return CreateResponse{}, err
	}
	if err := ValidateZones(p, zones); err != nil {
		return CreateResponse{}, err
	}

	if !local.exists {
		if _, err := c.Local(ctx, db, bsoncore.NewDocumentBuilder().AppendString("create", coll).Build()); err != nil &&
			!mongoerr.Is(err, mongoerr.NamespaceExists) {
			return CreateResponse{}, err
		}
		if local, err = c.localCollection(ctx, db, coll); err != nil {
			return CreateResponse{}, err
		}
		if !local.exists {
			return CreateResponse{}, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s was dropped while being sharded", req.NS)
		}
	}
	empty, err := c.isEmpty(ctx, db, coll)
	if err != nil {
		return CreateResponse{}, err
	}
	multikey := false
	if !empty {
		if multikey, err = c.hasArrayOnKey(ctx, db, coll, p); err != nil {
			return CreateResponse{}, err
		}
	}
	indexes, err := c.localIndexes(ctx, db, coll)
	if err != nil {
		return CreateResponse{}, err
	}
	plan, err := CheckIndexes(req.NS, p, req.Unique, indexes, local.defaultCollation != nil, empty, multikey)
	if err != nil {
		return CreateResponse{}, err
	}
	if plan.Create {
		cmd := bsoncore.NewDocumentBuilder().AppendString("createIndexes", coll).
			AppendArray("indexes", bsoncore.NewArrayBuilder().AppendDocument(plan.Spec).Build()).Build()
		if _, err := c.Local(ctx, db, cmd); err != nil {
			return CreateResponse{}, err
		}
		if indexes, err = c.localIndexes(ctx, db, coll); err != nil {
			return CreateResponse{}, err
		}
	}

	if err := remote.Shards.Reload(ctx); err != nil {
		return CreateResponse{}, err
	}
	all, err := remote.Shards.All(ctx)
	if err != nil {
		return CreateResponse{}, err
	}
	ids := make([]string, 0, len(all))
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	gen := routing.Generation{Epoch: bson.NewObjectID(), Timestamp: clusterTime(ctx, remote)}
	newChunks, err := InitialChunks(SplitParams{Pattern: p, UUID: local.uuid, Gen: gen, Primary: self, Shards: ids,
		NumInitialChunks: req.NumInitialChunks, Presplit: req.Presplit, Empty: empty,
		NS: req.NS, Zones: zones, ZoneShards: zoneShards})
	if err != nil {
		return CreateResponse{}, err
	}

	// Every other shard that gets chunks gets the collection, with the same UUID, and its
	// indexes.
	participants := map[string]bool{}
	for _, ch := range newChunks {
		if ch.Shard != self {
			participants[ch.Shard] = true
		}
	}
	for id := range participants {
		if err := c.createOnParticipant(ctx, remote, self, id, db, coll, local, indexes); err != nil {
			return CreateResponse{}, fmt.Errorf("create %s on shard %s: %w", req.NS, id, err)
		}
	}

	entry := catalogcache.Collection{NS: req.NS, UUID: local.uuid, Pattern: p, Gen: gen, Unique: req.Unique}
	collDoc := configclient.CollectionDoc(entry, time.Now().UnixMilli())
	if local.defaultCollation != nil {
		// CollectionType keeps the collection's default collation (shard key ranges
		// themselves always compare with the simple one).
		collDoc = appendField(collDoc, "defaultCollation", local.defaultCollation)
	}
	chunkDocs := bsoncore.NewArrayBuilder()
	for _, ch := range newChunks {
		chunkDocs.AppendDocument(ch.ConfigDoc())
	}
	commit := bsoncore.NewDocumentBuilder().AppendString("_configsvrCommitShardCollection", req.NS).
		AppendDocument("collection", collDoc).AppendArray("chunks", chunkDocs.Build()).
		AppendDocument("writeConcern", majority()).Build()
	// Versioned reads and writes of the namespace wait on this shard (the primary, which
	// holds its documents) from before the commit until every shard refreshed: a router
	// that still sees the collection unsharded cannot write a document to this shard that
	// a new chunk on another shard owns (7.0's critical section around the commit).
	if err := c.criticalSection(ctx, req.NS, "ReadsAndWrites"); err != nil {
		return CreateResponse{}, err
	}
	reply, err := Run(ctx, remote.Config(), "admin", commit)
	if err != nil {
		// Nothing committed: release (a failed release is retried by the resumed coordinator).
		_ = c.criticalSection(context.WithoutCancel(ctx), req.NS, "Unblock")
		return CreateResponse{}, err
	}
	if created, _ := reply.Lookup("created").BooleanOK(); created && c.LogEvent != nil {
		// The shardCollection event of change streams (7.0's
		// notifyChangeStreamsOnShardCollection), written once the commit holds. A failover
		// right before it loses the event, not the operation.
		desc := bsoncore.NewDocumentBuilder().AppendString("shardCollection", req.NS).AppendDocument("key", req.Key).
			AppendBoolean("unique", req.Unique).AppendInt64("numInitialChunks", req.NumInitialChunks).
			AppendBoolean("presplitHashedZones", req.Presplit)
		if req.Collation != nil {
			desc.AppendDocument("collation", req.Collation)
		}
		if err := c.LogEvent(ctx, req.NS, desc.Build()); err != nil {
			return CreateResponse{}, err
		}
	}
	if err := c.refreshShards(ctx, remote, self, ids, req.NS); err != nil {
		return CreateResponse{}, err
	}
	if err := c.criticalSection(ctx, req.NS, "Unblock"); err != nil {
		return CreateResponse{}, err
	}
	if created, _ := reply.Lookup("created").BooleanOK(); !created {
		// Another request sharded it first with the same options: report what is there.
		existing, chunks, _, err := remote.Catalog.Collection(ctx, req.NS, nil)
		if err != nil {
			return CreateResponse{}, err
		}
		rt, err := routing.New(existing.UUID, existing.Pattern, existing.Gen, chunks)
		if err != nil {
			return CreateResponse{}, err
		}
		return CreateResponse{UUID: existing.UUID, CollectionVersion: rt.Version()}, nil
	}
	return CreateResponse{UUID: local.uuid, CollectionVersion: newChunks[len(newChunks)-1].Version}, nil
}

// refreshShards has this shard and every other one refresh ns's filtering metadata from the
// config server once the collection is committed sharded (7.0's create coordinator clears
// the participants' metadata and refreshes every shard after its commit). Until then a shard
// that knew ns unsharded (or as a dropped incarnation) accepts a stale router's UNSHARDED (or
// old) version: the router would write the new collection's documents to the primary shard
// whatever their chunk. This shard's own refresh must succeed; it fails the command
// otherwise (a retried shardCollection finds the collection sharded and refreshes again).
// A refresh failing on another shard is not fatal: that shard refreshes on the first request
// carrying the new version, and owns no document of a collection it never had.
//
// The primary's critical section (criticalSection) blocks the collection's routed reads and
// writes between the commit and these refreshes.
func (c *Coordinator) refreshShards(ctx context.Context, remote *Remote, self string, shards []string, ns string) error {
	flush := bsoncore.NewDocumentBuilder().AppendString("_flushRoutingTableCacheUpdates", ns).Build()
	if _, err := c.Local(ctx, "admin", flush); err != nil {
		return fmt.Errorf("refresh %s's filtering metadata on the primary shard: %w", ns, err)
	}
	var wg sync.WaitGroup
	for _, id := range shards {
		if id == self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rs, err := remote.Shard(ctx, id); err == nil {
				_, _ = Run(ctx, rs, "admin", flush)
			}
		}()
	}
	wg.Wait()
	return nil
}

// appendField returns d with the document field name: v appended.
func appendField(d bsoncore.Document, name string, v bsoncore.Document) bsoncore.Document {
	out := append([]byte(nil), d[:len(d)-1]...)
	out = bsoncore.AppendDocumentElement(out, name, v)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

func majority() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()
}

func fmtDoc(d bsoncore.Document) string { return d.String() }

// clusterTime is the config server's cluster time (the new collection's timestamp and its
// chunks' validAfter). The vector clock that gossips it between nodes is not built yet
// (issue 12 Scope 7): the config server's reply carries its $clusterTime, which is past
// every catalog write it has made, so a re-created collection gets a later timestamp.
func clusterTime(ctx context.Context, remote *Remote) bson.Timestamp {
	raw, err := remote.Config().RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}, nil)
	if err == nil {
		if t, i, ok := bsoncore.Document(raw).Lookup("$clusterTime", "clusterTime").TimestampOK(); ok {
			return bson.Timestamp{T: t, I: i + 1}
		}
		if t, i, ok := bsoncore.Document(raw).Lookup("operationTime").TimestampOK(); ok {
			return bson.Timestamp{T: t, I: i + 1}
		}
	}
	return bson.Timestamp{T: uint32(time.Now().Unix()), I: 1}
}

// LocalColl is what listCollections says of a namespace on this node.
type LocalColl struct {
	exists, isView   bool
	uuid             catalog.UUID
	options          bsoncore.Document
	defaultCollation bsoncore.Document // nil: simple
}

func (c *Coordinator) localCollection(ctx context.Context, db, coll string) (LocalColl, error) {
	return LocalCollection(ctx, c.Local, db, coll)
}

// LocalCollection reads coll's listCollections entry on this node.
func LocalCollection(ctx context.Context, run RunFunc, db, coll string) (LocalColl, error) {
	var l LocalColl
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("name", coll).Build()).Build()
	docs, err := cursorAll(ctx, run, db, coll, cmd)
	if err != nil {
		return l, err
	}
	if len(docs) == 0 {
		return l, nil
	}
	d := docs[0]
	l.exists = true
	if t, _ := d.Lookup("type").StringValueOK(); t == "view" {
		l.isView = true
		return l, nil
	}
	l.options, _ = d.Lookup("options").DocumentOK()
	if st, b, ok := d.Lookup("info", "uuid").BinaryOK(); ok && st == 4 && len(b) == 16 {
		l.uuid = catalog.UUID(b)
	}
	if col, ok := l.options.Lookup("collation").DocumentOK(); ok && !IsSimpleCollation(col) {
		l.defaultCollation = col
	}
	return l, nil
}

// UUID is the collection's UUID (zero when it does not exist).
func (l LocalColl) UUID() catalog.UUID { return l.uuid }

// Exists reports whether the collection exists (as a collection or a view).
func (l LocalColl) Exists() bool { return l.exists }

func (c *Coordinator) localIndexes(ctx context.Context, db, coll string) ([]IndexSpec, error) {
	docs, err := cursorAll(ctx, c.Local, db, coll, bsoncore.NewDocumentBuilder().AppendString("listIndexes", coll).Build())
	if err != nil {
		return nil, err
	}
	out := make([]IndexSpec, len(docs))
	for i, d := range docs {
		out[i] = ParseIndexSpec(d)
	}
	return out, nil
}

func (c *Coordinator) isEmpty(ctx context.Context, db, coll string) (bool, error) {
	docs, err := cursorAll(ctx, c.Local, db, coll, bsoncore.NewDocumentBuilder().AppendString("find", coll).
		AppendDocument("projection", bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build()).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build())
	return len(docs) == 0, err
}

// hasArrayOnKey reports whether a document holds an array along a shard key field's path
// (what makes an index multikey on it: MongoDB refuses such an index as the shard key's).
func (c *Coordinator) hasArrayOnKey(ctx context.Context, db, coll string, p *shardkey.Pattern) (bool, error) {
	or := bsoncore.NewArrayBuilder()
	for _, f := range p.Fields() {
		parts := strings.Split(f, ".")
		for i := range parts {
			path := strings.Join(parts[:i+1], ".")
			or.AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument(path,
				bsoncore.NewDocumentBuilder().AppendString("$type", "array").Build()).Build())
		}
	}
	docs, err := cursorAll(ctx, c.Local, db, coll, bsoncore.NewDocumentBuilder().AppendString("find", coll).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendArray("$or", or.Build()).Build()).
		AppendDocument("projection", bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build()).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build())
	return len(docs) > 0, err
}

// createOnParticipant sends _shardsvrCreateCollectionParticipant to shard id.
func (c *Coordinator) createOnParticipant(ctx context.Context, remote *Remote, self, id, db, coll string, local LocalColl, indexes []IndexSpec) error {
	rs, err := remote.Shard(ctx, id)
	if err != nil {
		return err
	}
	ixs := bsoncore.NewArrayBuilder()
	var idIndex bsoncore.Document
	for _, ix := range indexes {
		if ix.Name == "_id_" {
			idIndex = ix.Raw
			continue
		}
		ixs.AppendDocument(ix.Raw)
	}
	b := bsoncore.NewDocumentBuilder().AppendString("_shardsvrCreateCollectionParticipant", coll).
		AppendArray("indexes", ixs.Build()).
		AppendDocument("options", emptyIfNil(local.options)).
		AppendBinary("collectionUUID", 4, local.uuid[:]).
		AppendString("primaryShardId", self)
	if idIndex != nil {
		b.AppendDocument("idIndex", idIndex)
	}
	_, err = Run(ctx, rs, db, b.AppendDocument("writeConcern", majority()).Build())
	return err
}

func emptyIfNil(d bsoncore.Document) bsoncore.Document {
	if d == nil {
		return bsoncore.NewDocumentBuilder().Build()
	}
	return d
}

// cursorAll runs a cursor command locally and follows it to the end.
func cursorAll(ctx context.Context, run RunFunc, db, coll string, cmd bsoncore.Document) ([]bsoncore.Document, error) {
	reply, err := run(ctx, db, cmd)
	var out []bsoncore.Document
	for field := "firstBatch"; ; field = "nextBatch" {
		if err != nil {
			return nil, err
		}
		batch, _ := reply.Lookup("cursor", field).ArrayOK()
		vals, _ := batch.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			out = append(out, append(bsoncore.Document(nil), d...))
		}
		id, _ := reply.Lookup("cursor", "id").AsInt64OK()
		if id == 0 {
			return out, nil
		}
		collName := coll
		if ns, ok := reply.Lookup("cursor", "ns").StringValueOK(); ok {
			if _, c, ok := strings.Cut(ns, "."); ok {
				collName = c
			}
		}
		reply, err = run(ctx, db, bsoncore.NewDocumentBuilder().AppendInt64("getMore", id).AppendString("collection", collName).Build())
	}
}

// criticalSection blocks ("ReadsAndWrites") or refreshes and unblocks ("Unblock") ns's
// routed reads and writes on this shard, persisted (_shardsvrParticipantBlock).
func (c *Coordinator) criticalSection(ctx context.Context, ns, blockType string) error {
	db, coll, _ := strings.Cut(ns, ".")
	_, err := c.Local(ctx, db, bsoncore.NewDocumentBuilder().AppendString("_shardsvrParticipantBlock", coll).
		AppendString("blockType", blockType).AppendString("reason", fmt.Sprintf("{ command: \"createCollection\", ns: \"%s\" }", ns)).Build())
	return err
}
