// Package configclient reads the config server's authoritative catalog (spec: sharding.md
// "The authoritative routing table"; MongoDB's ShardingCatalogClient): config.databases,
// config.collections, config.chunks and config.shards, with majority read concern so that
// nothing a config server failover can roll back is ever routed on. It is the Loader of the
// routing table cache (catalogcache) and of the shard registry (shardregistry).
//
// Reads also wait for the reader's ConfigTime (WithClock): they run in a causally consistent
// session whose operationTime is the ConfigTime, so the driver sends afterClusterTime and the
// config server answers only once its majority snapshot covers every catalog write the
// reader has heard of through $configTime gossip (MongoDB's config reads with
// ReadConcernArgs(configTime, majority)).
package configclient

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/vclock"
)

// Client reads the catalog through a driver client connected to the config server replica
// set.
type Client struct {
	config *mongo.Database
	clock  *vclock.Clock
}

// New returns a reader over cl (connected to the config servers).
func New(cl *mongo.Client) *Client {
	return &Client{config: cl.Database("config", options.Database().SetReadConcern(readconcern.Majority()))}
}

// WithClock makes the reads wait for clock's ConfigTime (see the package doc). Call before
// the first read.
func (c *Client) WithClock(clock *vclock.Clock) *Client {
	c.clock = clock
	return c
}

// reading returns the context of one load: with a ConfigTime to wait for, a causally
// consistent session that starts at it; done ends the session.
func (c *Client) reading(ctx context.Context) (_ context.Context, done func()) {
	if c.clock == nil {
		return ctx, func() {}
	}
	t := c.clock.Time().Config
	if t.IsNull() {
		return ctx, func() {}
	}
	sess, err := c.config.Client().StartSession(options.Session().SetCausalConsistency(true))
	if err != nil {
		return ctx, func() {}
	}
	ts := bson.Timestamp{T: t.Secs(), I: t.Inc()}
	if err := sess.AdvanceOperationTime(&ts); err != nil {
		sess.EndSession(ctx)
		return ctx, func() {}
	}
	return mongo.NewSessionContext(ctx, sess), func() { sess.EndSession(context.WithoutCancel(ctx)) }
}

var (
	_ catalogcache.Loader  = (*Client)(nil)
	_ shardregistry.Loader = (*Client)(nil)
)

// Database reads config.databases; NamespaceNotFound when the database has no entry. The
// config and admin databases are not in it: they live on the config server, with the fixed
// database version.
func (c *Client) Database(ctx context.Context, name string) (catalogcache.Database, error) {
	if name == "config" || name == "admin" {
		return catalogcache.Database{Name: name, Primary: "config", Version: routing.DatabaseVersion{}}, nil
	}
	ctx, done := c.reading(ctx)
	defer done()
	var raw bson.Raw
	err := c.config.Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&raw)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return catalogcache.Database{}, mongoerr.Newf(mongoerr.NamespaceNotFound, "database %s not found", name)
	}
	if err != nil {
		return catalogcache.Database{}, readError(ctx, "config.databases", err)
	}
	return ParseDatabase(bsoncore.Document(raw))
}

// ParseDatabase reads a config.databases document ({_id, primary, version}).
func ParseDatabase(doc bsoncore.Document) (catalogcache.Database, error) {
	var d catalogcache.Database
	var ok bool
	if d.Name, ok = doc.Lookup("_id").StringValueOK(); !ok {
		return d, mongoerr.New(mongoerr.NoSuchKey, "config.databases document without _id")
	}
	if d.Primary, ok = doc.Lookup("primary").StringValueOK(); !ok {
		return d, mongoerr.Newf(mongoerr.NoSuchKey, "config.databases entry of %s without primary", d.Name)
	}
	v, err := doc.LookupErr("version")
	if err != nil {
		return d, mongoerr.Newf(mongoerr.NoSuchKey, "config.databases entry of %s without version", d.Name)
	}
	if d.Version, err = routing.ParseDatabaseVersion(v); err != nil {
		return d, err
	}
	return d, nil
}

// Collection reads the collection's config.collections entry and its chunks (all of them,
// or those changed since *since when it is of the collection's current generation), as the
// catalog cache's refresh does. A collection without an entry is not sharded.
func (c *Client) Collection(ctx context.Context, ns string, since *routing.ChunkVersion) (catalogcache.Collection, []routing.Chunk, bool, error) {
	ctx, done := c.reading(ctx)
	defer done()
	var raw bson.Raw
	err := c.config.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&raw)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return catalogcache.Collection{NS: ns}, nil, false, nil
	}
	if err != nil {
		return catalogcache.Collection{}, nil, false, readError(ctx, "config.collections", err)
	}
	coll, err := ParseCollection(bsoncore.Document(raw))
	if err != nil {
		return catalogcache.Collection{}, nil, false, err
	}
	filter := bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: coll.UUID[:]}}}
	if since != nil && since.Generation == coll.Gen {
		filter = append(filter, bson.E{Key: "lastmod", Value: bson.D{{Key: "$gte", Value: since.Placement()}}})
	}
	cur, err := c.config.Collection("chunks").Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "lastmod", Value: 1}}))
	if err != nil {
		return catalogcache.Collection{}, nil, false, readError(ctx, "config.chunks", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var chunks []routing.Chunk
	for cur.Next(ctx) {
		ch, err := routing.ParseConfigChunk(bsoncore.Document(cur.Current), coll.Gen)
		if err != nil {
			return catalogcache.Collection{}, nil, false, err
		}
		chunks = append(chunks, ch)
	}
	if err := cur.Err(); err != nil {
		return catalogcache.Collection{}, nil, false, readError(ctx, "config.chunks", err)
	}
	return coll, chunks, true, nil
}

// ParseCollection reads a config.collections document (7.0's CollectionType: _id,
// lastmodEpoch, timestamp, uuid, key, unique).
func ParseCollection(doc bsoncore.Document) (catalogcache.Collection, error) {
	var c catalogcache.Collection
	var ok bool
	if c.NS, ok = doc.Lookup("_id").StringValueOK(); !ok {
		return c, mongoerr.New(mongoerr.NoSuchKey, "config.collections document without _id")
	}
	epoch, ok := doc.Lookup("lastmodEpoch").ObjectIDOK()
	if !ok {
		return c, mongoerr.Newf(mongoerr.NoSuchKey, "config.collections entry of %s without lastmodEpoch", c.NS)
	}
	t, i, ok := doc.Lookup("timestamp").TimestampOK()
	if !ok {
		return c, mongoerr.Newf(mongoerr.NoSuchKey, "config.collections entry of %s without timestamp", c.NS)
	}
	c.Gen = routing.Generation{Epoch: epoch, Timestamp: bson.Timestamp{T: t, I: i}}
	st, b, ok := doc.Lookup("uuid").BinaryOK()
	if !ok || st != 4 || len(b) != 16 {
		return c, mongoerr.Newf(mongoerr.NoSuchKey, "config.collections entry of %s without uuid", c.NS)
	}
	c.UUID = catalog.UUID(b)
	key, ok := doc.Lookup("key").DocumentOK()
	if !ok {
		return c, mongoerr.Newf(mongoerr.NoSuchKey, "config.collections entry of %s without key", c.NS)
	}
	p, err := shardkey.Parse(key)
	if err != nil {
		return c, err
	}
	c.Pattern = p
	c.Unique, _ = doc.Lookup("unique").BooleanOK()
	return c, nil
}

// CollectionDoc builds a config.collections document for c (lastmod is the wall-clock date
// the entry was written, in milliseconds).
func CollectionDoc(c catalogcache.Collection, lastmodMillis int64) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendString("_id", c.NS).
		AppendObjectID("lastmodEpoch", c.Gen.Epoch).
		AppendDateTime("lastmod", lastmodMillis).
		AppendTimestamp("timestamp", c.Gen.Timestamp.T, c.Gen.Timestamp.I).
		AppendBinary("uuid", 4, c.UUID[:]).
		AppendDocument("key", c.Pattern.Doc()).
		AppendBoolean("unique", c.Unique).Build()
}

// DatabaseDoc builds a config.databases document.
func DatabaseDoc(d catalogcache.Database) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendString("_id", d.Name).
		AppendString("primary", d.Primary).
		AppendDocument("version", d.Version.Doc()).Build()
}

// Shards reads config.shards.
func (c *Client) Shards(ctx context.Context) ([]shardregistry.Shard, error) {
	ctx, done := c.reading(ctx)
	defer done()
	cur, err := c.config.Collection("shards").Find(ctx, bson.D{})
	if err != nil {
		return nil, readError(ctx, "config.shards", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var out []shardregistry.Shard
	for cur.Next(ctx) {
		s, err := shardregistry.ParseShard(bsoncore.Document(cur.Current))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if err := cur.Err(); err != nil {
		return nil, readError(ctx, "config.shards", err)
	}
	return out, nil
}

// readError is the error of a failed read of coll. When no config server could be selected
// within the client's server selection timeout (all down, frozen or unreachable) it is
// MongoDB's FailedToSatisfyReadPreference (133), as mongos answers then, rather than the
// driver's timeout, which the wire boundary would report as MaxTimeMSExpired to a client
// that set no time limit. When ctx itself is done, its error is the answer.
func readError(ctx context.Context, coll string, err error) error {
	var sel topology.ServerSelectionError
	if errors.As(err, &sel) && ctx.Err() == nil {
		cause := err
		if sel.Wrapped != nil {
			cause = sel.Wrapped // without the topology description
		}
		return &mongoerr.Error{Code: mongoerr.FailedToSatisfyReadPreference,
			Msg: fmt.Sprintf("Could not find host matching read preference { mode: \"primary\" } for the config servers (read %s: %v)", coll, cause),
			Err: err}
	}
	return fmt.Errorf("read %s: %w", coll, err)
}
