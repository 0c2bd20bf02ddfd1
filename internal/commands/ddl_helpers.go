package commands

// Helpers shared by the DDL and statistics commands (create, drop, renameCollection, collMod,
// listDatabases, listCollections, createIndexes, dropIndexes, listIndexes, validate, dbStats,
// collStats, dataSize). Everything here carries the ddl prefix because several engineers add
// files to this package at once.

import (
	"context"
	"path/filepath"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/service"
)

// Location codes without a named constant in mongoerr yet (the lead moves them there).
const (
	ddlCodeCannotConvertIndexToUnique = mongoerr.CannotConvertIndexToUnique // collMod unique conversion with duplicates
)

// ddlStorage returns the server's storage or an error for servers started without one.
func ddlStorage(env *service.Env) (*operation.DB, error) {
	if env.State == nil || env.State.DB == nil {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "this server has no storage engine")
	}
	return env.State.DB, nil
}

// ddlCollectionNS resolves a command whose first element names a collection of env.DB
// ({create: "c"}): a non-string is InvalidNamespace as in MongoDB's IDL
// ("collection name has invalid type int").
func ddlCollectionNS(env *service.Env, cmd bsoncore.Document) (string, error) {
	v := commandArg(cmd)
	if v.Type != bsoncore.TypeString {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "collection name has invalid type %s", bsonutil.TypeName(v.Type))
	}
	ns := env.DB + "." + v.StringValue()
	if err := catalog.ValidateNS(ns); err != nil {
		return "", err
	}
	return ns, nil
}

// ddlAppendNumber appends n the way BSONObjBuilder::appendNumber(long long) does: int32 when
// |n| < 2^30, int64 otherwise, so statistics replies carry MongoDB's types.
func ddlAppendNumber(b []byte, key string, n int64) []byte {
	if n > -(1<<30) && n < 1<<30 {
		return bsoncore.AppendInt32Element(b, key, int32(n))
	}
	return bsoncore.AppendInt64Element(b, key, n)
}

// ddlParseCursorOption validates the optional `cursor: {batchSize}` argument and returns the
// batch size (-1 when absent: the default first batch).
func ddlParseCursorOption(cmdName string, cmd bsoncore.Document) (int64, error) {
	v := lookup(cmd, "cursor")
	if v.Type == 0 {
		return -1, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return 0, typeMismatch(cmdName, "cursor", v.Type, "object")
	}
	elems, err := d.Elements()
	if err != nil {
		return 0, mongoerr.Newf(mongoerr.InvalidBSON, "invalid cursor option: %v", err)
	}
	bs := int64(-1)
	for _, e := range elems {
		switch e.Key() {
		case "batchSize":
			n, err := intArg(cmdName+".cursor", "batchSize", e.Value())
			if err != nil {
				return 0, err
			}
			if n < 0 {
				return 0, mongoerr.Newf(mongoerr.Location51024,
					"BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
			}
			bs = n
		default:
			return 0, mongoerr.Newf(codeUnknownField, "BSON field '%s.cursor.%s' is an unknown field.", cmdName, e.Key())
		}
	}
	return bs, nil
}

// ddlBoolArg parses an optional IDL "safeBool" field (bool or number).
func ddlBoolArg(cmdName, field string, v bsoncore.Value) (bool, error) {
	switch v.Type {
	case 0:
		return false, nil
	case bsoncore.TypeBoolean, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		return truthy(v), nil
	}
	return false, typeMismatch(cmdName, field, v.Type, "bool")
}

// ddlWithout copies d without the named top-level fields.
func ddlWithout(d bsoncore.Document, drop ...string) bsoncore.Document {
	return doc(func(b []byte) []byte {
		elems, _ := d.Elements()
	outer:
		for _, e := range elems {
			for _, k := range drop {
				if e.Key() == k {
					continue outer
				}
			}
			b = append(b, e...)
		}
		return b
	})
}

// ddlIndexSpecs returns the ready indexes' specs as listIndexes shows them. A clustered
// collection's _id index is shown as MongoDB shows the clustered index ({..., unique: true,
// clustered: true}); Humongo keeps a regular _id index for it because the record store is
// keyed by RecordId, not by _id.
func ddlIndexSpecs(m *catalog.CollectionMeta) []bsoncore.Document {
	out := make([]bsoncore.Document, 0, len(m.Indexes))
	for i := range m.Indexes {
		ix := &m.Indexes[i]
		if !ix.Ready {
			continue
		}
		if m.Clustered && ix.IsIDIndex() {
			out = append(out, ddlClusteredSpec(m))
			continue
		}
		out = append(out, ix.Spec)
	}
	return out
}

// ddlClusteredSpec is the clustered index as listIndexes shows it.
func ddlClusteredSpec(m *catalog.CollectionMeta) bsoncore.Document {
	name := catalog.IDIndexName
	if ci, ok := lookup(m.Options, "clusteredIndex").DocumentOK(); ok {
		if n, ok := lookup(ci, "name").StringValueOK(); ok {
			name = n
		}
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "v", 2)
		b = bsoncore.AppendDocumentElement(b, "key", ddlIDKey)
		b = bsoncore.AppendStringElement(b, "name", name)
		b = bsoncore.AppendBooleanElement(b, "unique", true)
		return bsoncore.AppendBooleanElement(b, "clustered", true)
	})
}

var ddlIDKey = doc(func(b []byte) []byte { return bsoncore.AppendInt32Element(b, "_id", 1) })

// ddlIDIndexSpec is {v: 2, key: {_id: 1}, name: "_id_"}.
var ddlIDIndexSpec = doc(func(b []byte) []byte {
	b = bsoncore.AppendInt32Element(b, "v", 2)
	b = bsoncore.AppendDocumentElement(b, "key", ddlIDKey)
	return bsoncore.AppendStringElement(b, "name", catalog.IDIndexName)
})

// ddlIsSystem reports whether coll is a system collection (system.*).
func ddlIsSystem(ns string) bool {
	_, coll := catalog.SplitNS(ns)
	return strings.HasPrefix(coll, "system.")
}

// ddlDBPath returns the data directory (TempDir is <dbpath>/_tmp).
func ddlDBPath(db *operation.DB) string { return filepath.Dir(db.TempDir) }

// ddlForgetOnCommit drops the cached write path of a dropped collection once the drop commits.
func ddlForgetOnCommit(o *operation.Context, uuids ...catalog.UUID) {
	o.RU.OnCommit(func(optime.Timestamp) {
		for _, u := range uuids {
			o.DB.Colls.Forget(u)
		}
	})
}

// Size estimates. The engine keeps fast counts (records, data bytes) for record stores only,
// and Pebble's on-disk usage is not attributed per table, so statistics commands report:
// data size = the fast count of BSON bytes (exact, uncompressed); storage size = data size
// rounded up to a 4 KiB page (never below one page, as WiredTiger's empty tables);
// index size = records × ddlIndexEntryEstimate bytes per entry, also page-rounded.
const (
	ddlPageSize           = 4096
	ddlIndexEntryEstimate = 32
)

func ddlPageRound(n int64) int64 {
	if n <= 0 {
		return ddlPageSize
	}
	return (n + ddlPageSize - 1) / ddlPageSize * ddlPageSize
}

// ddlCollectionSizes returns a collection's record count and data size from the fast counts,
// its estimated storage size, and the estimated size of each ready index (catalog order) with
// their total.
func ddlCollectionSizes(db *operation.DB, m *catalog.CollectionMeta) (count, dataSize, storageSize, indexTotal int64, names []string, perIndex []int64) {
	count, dataSize = db.Engine.Counts(m.Ident)
	storageSize = ddlPageRound(dataSize)
	for i := range m.Indexes {
		if !m.Indexes[i].Ready {
			continue
		}
		sz := ddlPageRound(count * ddlIndexEntryEstimate)
		names = append(names, m.Indexes[i].Name)
		perIndex = append(perIndex, sz)
		indexTotal += sz
	}
	return
}

// ddlCheckCtx returns the context's error as MongoDB reports an interrupted operation.
func ddlCheckCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	return nil
}

// ddlKillCursors kills the open cursors over the given namespaces (after a drop or rename, as
// MongoDB does: their getMores would otherwise read a collection that is gone). It also kills
// listIndexes cursors of those collections.
func ddlKillCursors(env *service.Env, namespaces ...string) {
	if env.State == nil || len(namespaces) == 0 {
		return
	}
	set := map[string]bool{}
	for _, ns := range namespaces {
		set[ns] = true
		db, coll := catalog.SplitNS(ns)
		set[db+".$cmd.listIndexes."+coll] = true
	}
	env.State.Cursors().KillIf(func(c *cursor.Cursor) bool { return set[c.NS] })
}

// ddlKillDatabaseCursors kills every cursor over a collection of db except find cursors: as in
// MongoDB, those stay open and their next getMore fails with QueryPlanKilled when the plan
// executor finds its collection gone (Executor.Restore), not with CursorNotFound.
func ddlKillDatabaseCursors(env *service.Env, db string) {
	if env.State == nil {
		return
	}
	prefix := db + "."
	env.State.Cursors().KillIf(func(c *cursor.Cursor) bool {
		if _, isFind := c.Source.(*findSource); isFind {
			return false
		}
		return strings.HasPrefix(c.NS, prefix) && !strings.HasPrefix(c.NS, prefix+"$cmd.listCollections")
	})
}
