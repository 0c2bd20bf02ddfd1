package catalog

import (
	"strings"

	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// maxNSLength is MongoDB's limit on a fully qualified namespace (since 4.4).
const maxNSLength = 255

// maxDBNameLength: database names must be shorter than 64 bytes.
const maxDBNameLength = 64

// SplitNS splits "db.coll" at the first dot.
func SplitNS(ns string) (db, coll string) {
	db, coll, _ = strings.Cut(ns, ".")
	return db, coll
}

// ValidDBName reports whether db is a legal database name (MongoDB's
// DatabaseName::validDBName, normal mode).
func ValidDBName(db string) bool {
	if db == "" || len(db) >= maxDBNameLength {
		return false
	}
	return !strings.ContainsAny(db, "/\\. \"$*<>:|?\x00")
}

// ValidateNS returns InvalidNamespace (73) unless ns is "db.coll" with a legal database name
// and a legal collection name (non-empty, no NUL, no '$', not starting with '.').
func ValidateNS(ns string) error {
	if len(ns) > maxNSLength {
		return mongoerr.Newf(mongoerr.InvalidNamespace,
			"Fully qualified namespace is too long. Namespace: %s Max: %d", ns, maxNSLength)
	}
	db, coll, ok := strings.Cut(ns, ".")
	if !ok || !ValidDBName(db) || coll == "" || coll[0] == '.' ||
		strings.ContainsAny(coll, "$\x00") {
		return mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	return nil
}

// isLocalNS reports whether ns belongs to the unreplicated `local` database, whose tables
// are untimestamped (they keep their writes across RecoverToStable).
func isLocalNS(ns string) bool { return strings.HasPrefix(ns, "local.") }

// isOplogNS reports whether ns is an oplog (oplog-style table, no _id index).
func isOplogNS(ns string) bool { return strings.HasPrefix(ns, "local.oplog.") }

// identOptionsFor chooses the storage options of a new table of collection ns.
func identOptionsFor(ns string, collectionTable bool) storage.IdentOptions {
	return storage.IdentOptions{
		Untimestamped: isLocalNS(ns),
		Oplog:         collectionTable && isOplogNS(ns),
	}
}
