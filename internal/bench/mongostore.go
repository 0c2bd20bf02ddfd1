package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// MongoOptions configure a MongoStore.
type MongoOptions struct {
	Database   string // default "ycsb"
	Collection string // default "usertable"
	// WriteConcern and ReadConcern apply to every operation; nil leaves the server's default.
	WriteConcern *writeconcern.WriteConcern
	ReadConcern  *readconcern.ReadConcern
	// PoolSize is the driver's maximum connection pool size; set it to at least the thread count
	// so threads never queue for a connection inside the driver (that would be client latency).
	PoolSize int
	// ShardKey, if set, shards the collection on _id when the target is a router: "hashed"
	// ({_id: "hashed"}, presplit over the shards) or "range" ({_id: 1}, one chunk on the
	// database's primary shard). Shard shards it (enableSharding, shardCollection; nothing
	// to do if it is already sharded on that key) and Drop shards it again after dropping it,
	// so the load phase writes through the router's chunk routing. NewMongoStore refuses a
	// target that is not a router (hello without msg "isdbgrid").
	ShardKey string
}

// Shard keys of MongoOptions.ShardKey.
const (
	ShardKeyHashed = "hashed"
	ShardKeyRange  = "range"
)

// ShardKeyPattern is the shard key document of a MongoOptions.ShardKey name.
func ShardKeyPattern(name string) (bson.D, error) {
	switch name {
	case ShardKeyHashed:
		return bson.D{{Key: "_id", Value: "hashed"}}, nil
	case ShardKeyRange:
		return bson.D{{Key: "_id", Value: 1}}, nil
	}
	return nil, fmt.Errorf("unknown shard key %q (hashed or range)", name)
}

// MongoStore is the Store over the official Go driver, usable against any MongoDB-compatible
// server, as YCSB's mongodb binding.
type MongoStore struct {
	client *mongo.Client
	coll   *mongo.Collection
	admin  *mongo.Database
	txn    *options.TransactionOptionsBuilder // Transfer's transactions
	// shardKey is the key the collection is sharded on after a Drop (nil: not sharded).
	shardKey bson.D
}

// NewMongoStore connects to uri and checks the server answers a ping within timeout.
func NewMongoStore(ctx context.Context, uri string, o MongoOptions, timeout time.Duration) (*MongoStore, error) {
	if o.Database == "" {
		o.Database = "ycsb"
	}
	if o.Collection == "" {
		o.Collection = "usertable"
	}
	copts := options.Client().ApplyURI(uri).SetAppName("humongo bench").SetServerSelectionTimeout(timeout)
	if o.PoolSize > 0 {
		copts.SetMaxPoolSize(uint64(max(o.PoolSize, 100)))
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", RedactURI(uri), err)
	}
	s := &MongoStore{client: client, admin: client.Database("admin")}
	collOpts := options.Collection()
	if o.WriteConcern != nil {
		collOpts.SetWriteConcern(o.WriteConcern)
	}
	if o.ReadConcern != nil {
		collOpts.SetReadConcern(o.ReadConcern)
	}
	s.coll = client.Database(o.Database).Collection(o.Collection, collOpts)
	// A transaction's statements carry no write concern (the driver leaves the collection's
	// out inside one); its commit carries the transaction's, w:"majority" unless set.
	s.txn = options.Transaction().SetWriteConcern(writeconcern.Majority())
	if o.WriteConcern != nil {
		s.txn.SetWriteConcern(o.WriteConcern)
	}
	if o.ReadConcern != nil {
		s.txn.SetReadConcern(o.ReadConcern)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("%s does not answer ping: %w", RedactURI(uri), err)
	}
	if o.ShardKey != "" {
		if err := s.checkRouter(pctx, o.ShardKey); err != nil {
			_ = client.Disconnect(context.Background())
			return nil, err
		}
	}
	return s, nil
}

// checkRouter sets the shard key and checks that the target is a router.
func (s *MongoStore) checkRouter(ctx context.Context, shardKey string) error {
	var err error
	if s.shardKey, err = ShardKeyPattern(shardKey); err != nil {
		return err
	}
	var hello struct {
		Msg string `bson:"msg"`
	}
	if err := s.admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if hello.Msg != "isdbgrid" {
		return errors.New("sharding the collection needs a router (humongos or mongos) as the target; this server's hello has no msg \"isdbgrid\"")
	}
	return nil
}

// Shard shards the collection on the store's shard key (MongoOptions.ShardKey; nothing to do
// without one): the caller runs it before a workload that does not drop the collection first
// (Drop shards the new collection itself).
func (s *MongoStore) Shard(ctx context.Context) error {
	if s.shardKey == nil {
		return nil
	}
	return s.shardCollection(ctx)
}

// shardCollection enables sharding on the store's database and shards the collection on
// s.shardKey, through a router. shardCollection is idempotent for the same key and options;
// a collection sharded on another key fails with AlreadyInitialized, a non-empty unsharded
// one without a supporting index with InvalidOptions (both reported: drop it with --drop).
func (s *MongoStore) shardCollection(ctx context.Context) error {
	db := s.coll.Database().Name()
	ns := db + "." + s.coll.Name()
	if err := s.admin.RunCommand(ctx, bson.D{{Key: "enableSharding", Value: db}}).Err(); err != nil {
		return fmt.Errorf("enableSharding %s: %w", db, err)
	}
	if err := s.admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: s.shardKey}}).Err(); err != nil {
		return fmt.Errorf("shardCollection %s with key %v: %w", ns, s.shardKey, err)
	}
	return nil
}

// Close disconnects.
func (s *MongoStore) Close(ctx context.Context) error { return s.client.Disconnect(ctx) }

// Ping implements Store.
func (s *MongoStore) Ping(ctx context.Context) error {
	return s.admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}

// Read implements Store: find by _id, all fields, the whole document received.
func (s *MongoStore) Read(ctx context.Context, key string) error {
	_, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return ErrNotFound
	}
	return err
}

func setField(field string, value []byte) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: field, Value: string(value)}}}}
}

// Update implements Store.
func (s *MongoStore) Update(ctx context.Context, key, field string, value []byte) error {
	res, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: key}}, setField(field, value))
	if err != nil {
		return err
	}
	if res.MatchedCount == 0 && res.Acknowledged {
		return ErrNotFound
	}
	return nil
}

// Insert implements Store. The document is built directly as BSON bytes.
func (s *MongoStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	size := 16 + len(key)
	for _, f := range fields {
		size += 16 + len(f)
	}
	idx, doc := bsoncore.AppendDocumentStart(make([]byte, 0, size))
	doc = bsoncore.AppendStringElement(doc, "_id", key)
	var name []byte
	for i, f := range fields {
		name = strconv.AppendInt(append(name[:0], "field"...), int64(i), 10)
		// A BSON string is int32 length (with the NUL), bytes, NUL: appended straight from f.
		doc = bsoncore.AppendHeader(doc, bsoncore.TypeString, string(name))
		doc = bsoncore.AppendInt32(doc, int32(len(f)+1))
		doc = append(append(doc, f...), 0)
	}
	doc, err := bsoncore.AppendDocumentEnd(doc, idx)
	if err != nil {
		return err
	}
	_, err = s.coll.InsertOne(ctx, bson.Raw(doc))
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("%w: %w", ErrDuplicate, err)
	}
	return err
}

// Scan implements Store: find({_id: {$gte: startKey}}).sort({_id: 1}).limit(limit).
func (s *MongoStore) Scan(ctx context.Context, startKey string, limit int) (int, error) {
	cur, err := s.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: startKey}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)).SetBatchSize(int32(limit)))
	if err != nil {
		return 0, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	n := 0
	for cur.Next(ctx) {
		n++
	}
	return n, cur.Err()
}

// ReadModifyWrite implements Store: a read, then an update of one field (two round trips, as
// YCSB's binding does; not atomic).
func (s *MongoStore) ReadModifyWrite(ctx context.Context, key, field string, value []byte) error {
	if err := s.Read(ctx, key); err != nil {
		return err
	}
	return s.Update(ctx, key, field, value)
}

// errTxnNotFound aborts a Transfer whose record is missing (returned by the callback, so
// WithTransaction aborts and does not retry).
var errTxnNotFound = fmt.Errorf("transfer: %w", ErrNotFound)

// Transfer implements Store: Session.WithTransaction around two UpdateOne $inc, committed with
// the store's transaction write concern. A session is started per call: the driver pools the
// server sessions, so this costs no round trip.
func (s *MongoStore) Transfer(ctx context.Context, from, to string, amount int64) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(tctx context.Context) (any, error) {
		for _, u := range [2]struct {
			key string
			by  int64
		}{{from, -amount}, {to, amount}} {
			res, err := s.coll.UpdateOne(tctx, bson.D{{Key: "_id", Value: u.key}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: u.by}}}})
			if err != nil {
				return nil, err
			}
			if res.MatchedCount == 0 {
				return nil, errTxnNotFound
			}
		}
		return nil, nil
	}, s.txn)
	if errors.Is(err, errTxnNotFound) {
		return ErrNotFound
	}
	return err
}

// Drop implements Store; with a shard key it shards the new, empty collection again.
func (s *MongoStore) Drop(ctx context.Context) error {
	if err := s.coll.Drop(ctx); err != nil {
		return err
	}
	if s.shardKey != nil {
		return s.shardCollection(ctx)
	}
	return nil
}

// Count implements Store from the collection's metadata (the count command without a filter):
// it decides whether to load, where a full count of a large collection would be a phase itself.
func (s *MongoStore) Count(ctx context.Context) (int64, error) {
	return s.coll.EstimatedDocumentCount(ctx)
}

// ParseWriteConcern builds a write concern from --write-concern (w: "majority", a number, or a
// tag set name; empty for the server default) and --journal.
func ParseWriteConcern(w string, journal bool) (*writeconcern.WriteConcern, error) {
	if w == "" && !journal {
		return nil, nil
	}
	wc := &writeconcern.WriteConcern{}
	switch {
	case w == "":
	case w == "majority":
		wc.W = "majority"
	default:
		if n, err := strconv.Atoi(w); err == nil {
			if n < 0 {
				return nil, fmt.Errorf("write concern w must not be negative, got %d", n)
			}
			wc.W = n
		} else {
			wc.W = w // a tag set name, as custom getLastErrorModes
		}
	}
	if journal {
		j := true
		wc.Journal = &j
	}
	if !wc.IsValid() {
		return nil, fmt.Errorf("invalid write concern w=%q j=%v", w, journal)
	}
	return wc, nil
}

// ParseReadConcern builds a read concern from its level name; empty means the server default.
func ParseReadConcern(level string) (*readconcern.ReadConcern, error) {
	switch level {
	case "":
		return nil, nil
	case "local", "majority", "available", "linearizable", "snapshot":
		return &readconcern.ReadConcern{Level: level}, nil
	}
	return nil, fmt.Errorf("unknown read concern %q (local, majority, available, linearizable or snapshot)", level)
}

// RedactURI removes the password from a connection string for display.
func RedactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		if i := strings.Index(uri, "@"); i >= 0 && err != nil {
			return "<uri with credentials>"
		}
		return uri
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// isTimeout reports whether err is a time-limit error of the driver (one that refused to
// send the operation near the workload's deadline among them).
func isTimeout(err error) bool { return mongo.IsTimeout(err) }
