package configsvr

// createDatabase on the config server (spec: sharding.md "Databases"; MongoDB 7.0's
// ConfigsvrCreateDatabase command and ShardingCatalogManager::createDatabase): find or make
// the database's config.databases entry {_id, primary, version: {uuid, timestamp, lastMod}},
// the primary being the requested shard or the one with the least data.
//
// Not done here, as MongoDB does after the insert: _flushDatabaseCacheUpdates on the new
// primary shard (MongoDB notes it is not needed for correctness: the shard has no version of
// a new database cached); the shard-side versioning runtime owns that command.

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/sharding/shardstate"
)

// CreateDatabaseRequest is ConfigsvrCreateDatabase's arguments.
type CreateDatabaseRequest struct {
	Name string
	// PrimaryShard is primaryShardId: the shard the database must live on ("" lets the
	// config server choose).
	PrimaryShard string
	// EnableSharding is the IDL's enableSharding (may only be true when given); 7.0's catalog
	// keeps no per-database sharding bit, so it changes nothing.
	EnableSharding bool
}

// ParseCreateDatabase reads {_configsvrCreateDatabase: "<db>", primaryShardId?, enableSharding?}
// as the IDL does.
func ParseCreateDatabase(cmd bsoncore.Document) (CreateDatabaseRequest, error) {
	var r CreateDatabaseRequest
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return r, mongoerr.New(mongoerr.FailedToParse, "_configsvrCreateDatabase: empty command")
	}
	name, ok := elems[0].Value().StringValueOK()
	if !ok {
		return r, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '_configsvrCreateDatabase._configsvrCreateDatabase' is the wrong type '%s', expected type 'string'",
			typeName(elems[0].Value().Type))
	}
	r.Name = name
	for _, e := range elems[1:] {
		switch e.Key() {
		case "primaryShardId":
			s, ok := e.Value().StringValueOK()
			if !ok {
				return r, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '_configsvrCreateDatabase.primaryShardId' is the wrong type '%s', expected type 'string'",
					typeName(e.Value().Type))
			}
			if s == "" {
				return r, mongoerr.Newf(mongoerr.BadValue, "invalid shard name: %s", s)
			}
			r.PrimaryShard = s
		case "enableSharding":
			b, ok := e.Value().BooleanOK()
			if !ok {
				return r, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '_configsvrCreateDatabase.enableSharding' is the wrong type '%s', expected type 'bool'",
					typeName(e.Value().Type))
			}
			if !b {
				return r, mongoerr.New(mongoerr.BadValue, "BSON field '_configsvrCreateDatabase.enableSharding' may only be set to 'true'")
			}
			r.EnableSharding = true
		}
	}
	return r, nil
}

func typeName(t bsoncore.Type) string {
	switch t {
	case bsoncore.TypeString:
		return "string"
	case bsoncore.TypeInt32:
		return "int"
	case bsoncore.TypeInt64:
		return "long"
	case bsoncore.TypeDouble:
		return "double"
	case bsoncore.TypeBoolean:
		return "bool"
	case bsoncore.TypeEmbeddedDocument:
		return "object"
	case bsoncore.TypeArray:
		return "array"
	case bsoncore.TypeNull:
		return "null"
	}
	return t.String()
}

// ValidDBName is NamespaceString::validDBName with '$' allowed: not empty, shorter than 64
// bytes, none of / \ . space " or NUL.
func ValidDBName(db string) bool {
	if db == "" || len(db) >= 64 {
		return false
	}
	return !strings.ContainsAny(db, "/\\. \"\x00")
}

// CreateDatabase returns the database's entry, creating it when it has none (MongoDB's
// ShardingCatalogManager::createDatabase). Concurrent creations of one name agree: the
// entry is inserted keyed by _id, and a duplicate key reads the winner's back.
func (m *Manager) CreateDatabase(ctx context.Context, req CreateDatabaseRequest) (catalogcache.Database, error) {
	name := req.Name
	if name == "config" {
		return catalogcache.Database{Name: name, Primary: shardstate.ConfigServerShardID}, nil
	}
	if name == "admin" || name == "local" {
		return catalogcache.Database{}, mongoerr.Newf(mongoerr.InvalidOptions, "Cannot manually create database'%s'", name)
	}
	if !ValidDBName(name) {
		return catalogcache.Database{}, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid db name specified: %s", name)
	}
	var primary *shardregistry.Shard
	if req.PrimaryShard != "" {
		s, err := m.shard(ctx, req.PrimaryShard)
		if err != nil {
			return catalogcache.Database{}, err
		}
		primary = &s
	}
	exact := bsoncore.NewDocumentBuilder().AppendString("_id", name)
	if primary != nil {
		exact.AppendString("primary", primary.ID)
	}
	filter := exact.Build()
	// The optimistic path, without the lock: the database usually exists.
	if d, found, err := m.findDatabase(ctx, filter); err != nil || found {
		return d, err
	}
	m.dbCreate.Lock()
	defer m.dbCreate.Unlock()
	if d, found, err := m.findDatabase(ctx, filter); err != nil || found {
		return d, err
	}
	caseless := bsoncore.NewDocumentBuilder().AppendDocument("_id", bsoncore.NewDocumentBuilder().
		AppendRegex("$regex", "^"+regexp.QuoteMeta(name)+"$", "i").Build()).Build()
	if d, found, err := m.findDatabase(ctx, caseless); err != nil {
		return d, err
	} else if found {
		return d, sameDatabase(d, name, primary)
	}
	if primary == nil {
		s, err := m.selectShardForNewDatabase(ctx)
		if err != nil {
			return catalogcache.Database{}, err
		}
		primary = &s
	}
	db := catalogcache.Database{Name: name, Primary: primary.ID,
		Version: routing.NewDatabaseVersion(catalog.NewUUID(), m.Now())}
	err := m.insert(ctx, "databases", configclient.DatabaseDoc(db))
	if mongoerr.CodeOf(err) == mongoerr.DuplicateKey {
		// Another config primary's creation won (this one's lock is per node): theirs is
		// the database.
		d, found, ferr := m.findDatabase(ctx, caseless)
		if ferr != nil {
			return d, ferr
		}
		if found {
			return d, sameDatabase(d, name, primary)
		}
	}
	if err != nil {
		return catalogcache.Database{}, err
	}
	if err := m.insert(ctx, "placementHistory", placementDoc(name, db.Version.Timestamp, primary.ID)); err != nil {
		return catalogcache.Database{}, err
	}
	return db, nil
}

// sameDatabase checks that an existing entry found for name is the one asked for.
func sameDatabase(d catalogcache.Database, name string, primary *shardregistry.Shard) error {
	if d.Name != name {
		return mongoerr.Newf(mongoerr.DatabaseDifferCase, "can't have 2 databases that just differ on case  have: %s want to add: %s", d.Name, name)
	}
	if primary != nil && primary.ID != d.Primary {
		return mongoerr.Newf(mongoerr.NamespaceExists, "database already created on a primary which is different from %s", primary.ID)
	}
	return nil
}

// shard reads one config.shards entry; ShardNotFound as the shard registry answers.
func (m *Manager) shard(ctx context.Context, id string) (shardregistry.Shard, error) {
	docs, err := m.find(ctx, "shards", bsoncore.NewDocumentBuilder().AppendString("_id", id).Build(), 1)
	if err != nil {
		return shardregistry.Shard{}, err
	}
	if len(docs) == 0 {
		return shardregistry.Shard{}, mongoerr.Newf(mongoerr.ShardNotFound, "Shard %s not found", id)
	}
	return shardregistry.ParseShard(docs[0])
}

// selectShardForNewDatabase picks the shard with the least data (listDatabases's totalSize
// on each shard's primary), ties to the lowest shard id.
func (m *Manager) selectShardForNewDatabase(ctx context.Context) (shardregistry.Shard, error) {
	shards, err := m.shards(ctx)
	if err != nil {
		return shardregistry.Shard{}, err
	}
	if len(shards) == 0 {
		return shardregistry.Shard{}, mongoerr.New(mongoerr.ShardNotFound, "No shards found")
	}
	slices.SortFunc(shards, func(a, b shardregistry.Shard) int { return strings.Compare(a.ID, b.ID) })
	best, bestSize := -1, int64(0)
	for i, s := range shards {
		size, err := m.totalShardSize(ctx, s)
		if err != nil {
			return shardregistry.Shard{}, err
		}
		if best < 0 || size < bestSize {
			best, bestSize = i, size
		}
	}
	return shards[best], nil
}

// totalShardSize is shardutil::retrieveTotalShardSize: listDatabases's totalSize on the
// shard's primary.
func (m *Manager) totalShardSize(ctx context.Context, s shardregistry.Shard) (int64, error) {
	hosts, err := client.ParseReplicaSetHosts(s.Host)
	if err != nil {
		return 0, err
	}
	rs, err := client.NewReplicaSet(hosts, m.Client)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	raw, err := rs.RunCommand(ctx, "admin", bson.D{{Key: "listDatabases", Value: 1}}, readpref.Primary())
	if err != nil {
		return 0, mongoerr.Newf(mongoerr.OperationFailed, "could not read the size of shard %s: %v", s.ID, err)
	}
	size, ok := bsoncore.Document(raw).Lookup("totalSize").AsInt64OK()
	if !ok {
		return 0, mongoerr.Newf(mongoerr.NoSuchKey, "listDatabases on shard %s answered without totalSize", s.ID)
	}
	return size, nil
}
