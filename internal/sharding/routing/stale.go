package routing

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// IsWriteCompatibleWith is ChunkVersion::isWriteCompatibleWith: the same collection
// generation and the same major version (minor changes, splits and merges, move no data).
func (v ChunkVersion) IsWriteCompatibleWith(o ChunkVersion) bool {
	return v.SameCollection(o.Generation) && v.Major == o.Major
}

// CheckShardVersion is the shard-side check of a request's shardVersion against the shard's
// own placement version for the collection (CollectionShardingRuntime's
// checkShardVersionOrThrow): IGNORED and write-compatible versions pass; otherwise
// StaleConfig (13388) with MongoDB's reason and its extra info {ns, vReceived, vWanted,
// shardId} (StaleConfigInfo), which tells the router what to refresh.
func CheckShardVersion(ns, shardID string, received, wanted ChunkVersion) error {
	if received.IsIgnored() || wanted.IsWriteCompatibleWith(received) {
		return nil
	}
	var msg string
	switch {
	case !wanted.SameCollection(received.Generation):
		msg = "timestamp mismatch detected for " + ns
	case !wanted.IsSet() && received.IsSet():
		msg = "this shard no longer contains chunks for " + ns + ", the collection may have been dropped"
	case wanted.IsSet() && !received.IsSet():
		msg = "this shard contains chunks for " + ns + ", but the client expects unsharded collection"
	default:
		msg = "placement version mismatch detected for " + ns
	}
	return mongoerr.New(mongoerr.StaleConfig, msg).WithInfo(StaleConfigInfo(ns, shardID, received, &wanted))
}

// StaleConfigInfo is StaleConfigInfo::serialize: {ns, vReceived, vWanted (when known),
// shardId}, the versions in the shardVersion wire form.
func StaleConfigInfo(ns, shardID string, received ChunkVersion, wanted *ChunkVersion) bsoncore.Document {
	idx, d := bsoncore.AppendDocumentStart(nil)
	d = bsoncore.AppendStringElement(d, "ns", ns)
	d = received.AppendShardVersion(d, "vReceived")
	if wanted != nil {
		d = wanted.AppendShardVersion(d, "vWanted")
	}
	d = bsoncore.AppendStringElement(d, "shardId", shardID)
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d
}

// CheckDatabaseVersion is the shard-side check of a request's databaseVersion
// (DatabaseShardingState::assertMatchingDbVersion): wanted nil means the shard does not know
// the database's version yet. A mismatch is StaleDbVersion (249) with the extra info
// {db, vReceived, vWanted} (StaleDbRoutingVersion).
func CheckDatabaseVersion(db string, received DatabaseVersion, wanted *DatabaseVersion) error {
	if wanted == nil {
		return mongoerr.New(mongoerr.StaleDbVersion,
			"sharding status of database "+db+" is not currently known and needs to be recovered").
			WithInfo(staleDbInfo(db, received, nil))
	}
	if received != *wanted {
		return mongoerr.New(mongoerr.StaleDbVersion, "version mismatch detected for "+db).
			WithInfo(staleDbInfo(db, received, wanted))
	}
	return nil
}

func staleDbInfo(db string, received DatabaseVersion, wanted *DatabaseVersion) bsoncore.Document {
	idx, d := bsoncore.AppendDocumentStart(nil)
	d = bsoncore.AppendStringElement(d, "db", db)
	d = received.AppendDoc(d, "vReceived")
	if wanted != nil {
		d = wanted.AppendDoc(d, "vWanted")
	}
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d
}
