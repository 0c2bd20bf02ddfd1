package configsvr

// movePrimary's commit on the config server (MongoDB 7.0's _configsvrCommitMovePrimary and
// ShardingCatalogManager::commitMovePrimary): the database's config.databases entry gets its
// new primary and the next database version (DatabaseVersion::makeUpdated), matched on the
// version the donor started from, so a retried or delayed commit changes nothing twice. The
// donor reads the entry back to learn whether the move committed.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// CommitMovePrimary makes shard to the primary of db if db's version is still expected.
// Serialized with removeShard (MongoDB holds the shard membership lock shared) so that a
// database never lands on a shard being removed.
func (m *Manager) CommitMovePrimary(ctx context.Context, db string, expected routing.DatabaseVersion, to string) error {
	m.membership.Lock()
	defer m.membership.Unlock()
	if _, err := m.shard(ctx, to); err != nil {
		return err
	}
	q := bsoncore.NewDocumentBuilder().AppendString("_id", db).
		AppendBinary("version.uuid", 4, expected.UUID[:]).
		AppendTimestamp("version.timestamp", expected.Timestamp.T, expected.Timestamp.I).
		AppendInt32("version.lastMod", expected.LastMod).Build()
	u := bsoncore.NewDocumentBuilder().AppendDocument("$set", bsoncore.NewDocumentBuilder().
		AppendString("primary", to).AppendDocument("version", expected.Updated().Doc()).Build()).Build()
	n, err := m.update(ctx, "databases", q, u, false)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil // committed already, or the database changed since: the donor checks
	}
	return m.insert(ctx, "placementHistory", placementDoc(db, m.Now(), to))
}

// ParseCommitMovePrimary reads {_configsvrCommitMovePrimary: "<db>", expectedDatabaseVersion,
// to} as the ConfigsvrCommitMovePrimary IDL does.
func ParseCommitMovePrimary(cmd bsoncore.Document) (db string, expected routing.DatabaseVersion, to string, err error) {
	first, ierr := cmd.IndexErr(0)
	if ierr != nil {
		return "", expected, "", mongoerr.New(mongoerr.FailedToParse, "_configsvrCommitMovePrimary: empty command")
	}
	db, ok := first.Value().StringValueOK()
	if !ok || !ValidDBName(db) {
		return "", expected, "", mongoerr.Newf(mongoerr.InvalidNamespace, "invalid db name specified: %s", first.Value())
	}
	v, lerr := cmd.LookupErr("expectedDatabaseVersion")
	if lerr != nil {
		return "", expected, "", mongoerr.New(mongoerr.Location40414, "BSON field '_configsvrCommitMovePrimary.expectedDatabaseVersion' is missing but a required field")
	}
	if expected, err = routing.ParseDatabaseVersion(v); err != nil {
		return "", expected, "", err
	}
	tv, lerr := cmd.LookupErr("to")
	if lerr != nil {
		return "", expected, "", mongoerr.New(mongoerr.Location40414, "BSON field '_configsvrCommitMovePrimary.to' is missing but a required field")
	}
	if to, ok = tv.StringValueOK(); !ok || to == "" {
		return "", expected, "", mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '_configsvrCommitMovePrimary.to' is the wrong type '%s', expected type 'string'",
			bsonutil.TypeName(tv.Type))
	}
	return db, expected, to, nil
}
