package auth

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Kind is what a resource pattern matches (MongoDB's MatchTypeEnum).
type Kind uint8

const (
	// KindCluster: cluster-wide actions ({cluster: true}).
	KindCluster Kind = iota + 1
	// KindDB: a database and its normal collections ({db: "x", collection: ""}).
	KindDB
	// KindNS: one exact namespace ({db: "x", collection: "y"}).
	KindNS
	// KindCollection: a collection name in every database ({db: "", collection: "y"}).
	KindCollection
	// KindAnyNormal: every normal namespace and database but local and config
	// ({db: "", collection: ""}).
	KindAnyNormal
	// KindAny: everything, cluster included ({anyResource: true}).
	KindAny
)

// Resource is both a resource pattern in a privilege and the resource an operation needs
// actions on (then KindCluster, KindDB, KindNS or KindAnyNormal).
type Resource struct {
	Kind     Kind
	DB, Coll string
}

// Cluster is the cluster resource.
func Cluster() Resource { return Resource{Kind: KindCluster} }

// DB is database db.
func DB(db string) Resource { return Resource{Kind: KindDB, DB: db} }

// NS is the namespace db.coll.
func NS(db, coll string) Resource { return Resource{Kind: KindNS, DB: db, Coll: coll} }

// AnyNormal is every normal resource (cluster-wide change streams, listDatabases filters).
func AnyNormal() Resource { return Resource{Kind: KindAnyNormal} }

// AnyResource is every resource.
func AnyResource() Resource { return Resource{Kind: KindAny} }

// CollectionName is collection coll in every database.
func CollectionName(coll string) Resource { return Resource{Kind: KindCollection, Coll: coll} }

// NSFromFull splits "db.coll" (a database alone when there is no dot).
func NSFromFull(ns string) Resource {
	db, coll, ok := strings.Cut(ns, ".")
	if !ok || coll == "" {
		return DB(db)
	}
	return NS(db, coll)
}

// normalDB: databases other than local and config (admin is normal).
func normalDB(db string) bool { return db != "local" && db != "config" }

// IsSystemCollection reports a system collection (system.*), which database-wide privileges
// do not cover.
func IsSystemCollection(coll string) bool { return strings.HasPrefix(coll, "system.") }

// searchList returns the patterns that match r, most specific last (MongoDB's
// buildResourceSearchList); n is the count used of out.
func (r Resource) searchList(out *[5]Resource) int {
	n := 0
	out[n] = AnyResource()
	n++
	switch r.Kind {
	case KindNS:
		if !IsSystemCollection(r.Coll) {
			if normalDB(r.DB) {
				out[n] = AnyNormal()
				n++
			}
			out[n] = DB(r.DB)
			n++
		}
		out[n] = CollectionName(r.Coll)
		n++
	case KindDB:
		if normalDB(r.DB) {
			out[n] = AnyNormal()
			n++
		}
	}
	out[n] = r
	n++
	return n
}

// String is the resource's document form as text, for messages.
func (r Resource) String() string {
	switch r.Kind {
	case KindCluster:
		return "{ cluster: true }"
	case KindAny:
		return "{ anyResource: true }"
	}
	return `{ db: "` + r.DB + `", collection: "` + r.Coll + `" }`
}

// AppendDoc appends r's resource document ({db, collection} | {cluster: true} |
// {anyResource: true}) as field key.
func (r Resource) AppendDoc(b []byte, key string) []byte {
	idx, b := bsoncore.AppendDocumentElementStart(b, key)
	switch r.Kind {
	case KindCluster:
		b = bsoncore.AppendBooleanElement(b, "cluster", true)
	case KindAny:
		b = bsoncore.AppendBooleanElement(b, "anyResource", true)
	default:
		b = bsoncore.AppendStringElement(b, "db", r.DB)
		b = bsoncore.AppendStringElement(b, "collection", r.Coll)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// ParseResource reads a privilege's resource document.
func ParseResource(d bsoncore.Document) (Resource, error) {
	if v, err := d.LookupErr("cluster"); err == nil {
		if v.Type != bsoncore.TypeBoolean || !v.Boolean() || len(mustElems(d)) != 1 {
			return Resource{}, badValue("resource: {cluster: true} must have no other fields and be true")
		}
		return Cluster(), nil
	}
	if v, err := d.LookupErr("anyResource"); err == nil {
		if v.Type != bsoncore.TypeBoolean || !v.Boolean() || len(mustElems(d)) != 1 {
			return Resource{}, badValue("resource: {anyResource: true} must have no other fields and be true")
		}
		return AnyResource(), nil
	}
	db, ok1 := d.Lookup("db").StringValueOK()
	coll, ok2 := d.Lookup("collection").StringValueOK()
	if !ok1 || !ok2 || len(mustElems(d)) != 2 {
		return Resource{}, badValue("resource pattern must contain 'collection' and 'db' fields, or be {cluster: true} or {anyResource: true}")
	}
	switch {
	case db == "" && coll == "":
		return AnyNormal(), nil
	case db == "":
		return CollectionName(coll), nil
	case coll == "":
		return DB(db), nil
	}
	return NS(db, coll), nil
}

func mustElems(d bsoncore.Document) []bsoncore.Element {
	e, _ := d.Elements()
	return e
}
