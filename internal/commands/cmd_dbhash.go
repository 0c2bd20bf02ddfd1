package commands

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/storage"
)

func addDbHash(r *service.Registry) {
	add(r, &service.Command{
		Name:    "dbHash",
		Auth:    service.AuthOnDB(auth.DbHash),
		Aliases: []string{"dbhash"},
		Handler: runDBHash,
		Help:    "Returns an md5 hash of the documents of every collection of a database, and of the whole database.\nExample: { dbHash: 1, collections: [\"c\"] }",
		// MongoDB's dbHash is AllowedOnSecondary::kAlways: replica-set consistency checks run
		// it on every member without a read preference.
		SecondaryOk: true,
	})
}

// dbHashNoIDIndex is the hash MongoDB reports for a collection it cannot hash in _id order
// (no _id index and not capped).
const dbHashNoIDIndex = "no _id _index"

// runDBHash answers MongoDB's dbHash (dbhash.cpp): per collection, the md5 of its documents'
// BSON in _id order; `md5`, the md5 of those hex digests in collection-name order; plus the
// capped collections and every collection's UUID. Members of a replica set that applied the
// same oplog report identical hashes, which is what initial sync and consistency checks compare.
//
// The whole database is read through one storage snapshot, so the hashes describe one point
// in time: on a primary or standalone the newest data, with the database locked in S mode as
// mongod does (writers wait, so nothing is half-written); on any other member the node's
// lastApplied timestamp (as local reads on a secondary, never half an applier batch) with
// intent locks only, so the applier keeps going.
func runDBHash(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	start := time.Now()
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	want, err := dbHashCollectionsArg(cmd)
	if err != nil {
		return nil, err
	}
	if !catalog.ValidDBName(env.DB) {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid db name: %s", env.DB)
	}

	op := db.NewOp(ctx)
	defer op.Close()
	// dbHash reads the data as it was before any prepared transaction wrote it, as mongod's
	// (canIgnorePrepareConflicts; it reads at read concern local only): a consistency check
	// must not wait for a coordinator's decision, and members holding the same prepared
	// transaction hash the same pre-prepare data.
	if err := op.RU.SetPrepareConflictBehavior(storage.PrepareConflictIgnore); err != nil {
		return nil, err
	}
	mode := lock.ModeS
	if rc := env.State.Repl; rc != nil && !rc.IsWritablePrimary() {
		if la := rc.LastApplied(); !la.IsNull() {
			if err := op.RU.SetReadSource(storage.ReadProvided, la.TS); err != nil {
				return nil, err
			}
			mode = lock.ModeIS
		}
	}
	scope, err := op.Locker.DBLock(ctx, env.DB, mode)
	if err != nil {
		return nil, err
	}
	defer func() { _ = scope.Release() }()
	// Open the snapshot now: the catalog and every collection are read through it.
	if err := op.RU.PreallocateSnapshot(); err != nil {
		return nil, err
	}
	snap, err := db.Catalog.At(op.RU)
	if err != nil {
		return nil, err
	}

	metas := snap.Collections(env.DB)
	sort.Slice(metas, func(i, j int) bool { return metas[i].Coll() < metas[j].Coll() })
	type hashed struct {
		name, hash string
		meta       *catalog.CollectionMeta
	}
	var out []hashed
	for _, m := range metas {
		name := m.Coll()
		if !dbHashReplicated(m) || (want != nil && !want[name]) {
			continue
		}
		var h string
		if mode == lock.ModeIS {
			// Intent mode on the database does not keep a collection from being dropped
			// while it is read; the collection lock does.
			cscope, err := op.Locker.CollectionLock(ctx, m.NS, lock.ModeIS)
			if err != nil {
				return nil, err
			}
			h, err = dbHashCollection(ctx, op, m)
			_ = cscope.Release()
			if err != nil {
				return nil, err
			}
		} else if h, err = dbHashCollection(ctx, op, m); err != nil {
			return nil, err
		}
		out = append(out, hashed{name: name, hash: h, meta: m})
	}

	all := md5.New()
	for _, c := range out {
		all.Write([]byte(c.hash))
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "host", env.State.Host)
		ci, b := bsoncore.AppendDocumentElementStart(b, "collections")
		for _, c := range out {
			b = bsoncore.AppendStringElement(b, c.name, c.hash)
		}
		b, _ = bsoncore.AppendDocumentEnd(b, ci)
		var capped []string
		for _, c := range out {
			if c.meta.Capped {
				capped = append(capped, c.name)
			}
		}
		b = appendStrings(b, "capped", capped)
		ui, b := bsoncore.AppendDocumentElementStart(b, "uuids")
		for _, c := range out {
			b = bsoncore.AppendBinaryElement(b, c.name, 4, c.meta.UUID[:])
		}
		b, _ = bsoncore.AppendDocumentEnd(b, ui)
		b = bsoncore.AppendStringElement(b, "md5", hex.EncodeToString(all.Sum(nil)))
		b = bsoncore.AppendInt64Element(b, "timeMillis", time.Since(start).Milliseconds())
		// Humongo keeps no hash cache; the field is kept for clients that read it.
		return appendStrings(b, "fromCache", nil)
	}), nil
}

// dbHashCollectionsArg parses the optional `collections` filter: nil when absent or empty
// (every collection, as in mongod, where an empty list filters nothing), else the set of
// collection names to hash.
func dbHashCollectionsArg(cmd bsoncore.Document) (map[string]bool, error) {
	v := lookup(cmd, "collections")
	if v.Type == 0 {
		return nil, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch("dbHash", "collections", v.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid collections array: %v", err)
	}
	want := make(map[string]bool, len(vals))
	for _, x := range vals {
		s, ok := x.StringValueOK()
		if !ok {
			// MongoDB's own message and code for a non-string entry.
			return nil, mongoerr.New(mongoerr.BadValue, "collections entries must be of type string")
		}
		want[s] = true
	}
	if len(want) == 0 {
		return nil, nil
	}
	return want, nil
}

// dbHashReplicated reports whether dbHash includes m: only replicated collections
// (NamespaceString::isReplicated: nothing in `local`, no system.profile), and not the
// temporary collections of an incremental mapReduce, which are not replicated either, nor
// the change stream pre-images, which each member writes and expires on its own schedule.
func dbHashReplicated(m *catalog.CollectionMeta) bool {
	coll := m.Coll()
	switch {
	case m.DB() == "local", coll == "system.profile", strings.HasPrefix(coll, "tmp.mr."),
		strings.HasPrefix(coll, "system.drop."), m.NS == oplog.PreImagesNS:
		return false
	}
	return true
}

// dbHashCollection is the md5 (hex) of m's documents, concatenated as stored, in _id order:
// an _id index scan (clustered collections have one too: their record store is keyed by
// RecordId, see ddlCreateCollection), or, for a capped collection without an _id index, the
// record store's insertion order, as mongod's collection scan.
//
// Orphans are hashed too: mongod's dbHash scans without a shard filter (operation.ReadAllRecords).
func dbHashCollection(ctx context.Context, op *operation.Context, m *catalog.CollectionMeta) (string, error) {
	rd, err := op.ReadLocked(m.NS, m, nil, operation.ReadAllRecords) // the read seam (operation/read.go)
	if err != nil {
		return "", err
	}
	coll := rd.Coll()
	h := md5.New()
	if idMeta, ok := m.Index(catalog.IDIndexName); ok && idMeta.Ready {
		// The index access method is built from the snapshot's metadata, not the newest
		// catalog, so it matches what the snapshot holds.
		ix, err := index.NewIndex(m.NS, idMeta, nil)
		if err != nil {
			return "", err
		}
		cur, err := ix.NewCursor(op.RU, index.ScanOptions{})
		if err != nil {
			return "", err
		}
		defer cur.Close()
		rs := coll.RecordStore()
		for i := 0; cur.Next(); i++ {
			if i%1000 == 0 {
				if err := ddlCheckCtx(ctx); err != nil {
					return "", err
				}
			}
			raw, found, err := rs.Get(op.RU, cur.RecordID())
			if err != nil {
				return "", err
			}
			if !found {
				// The index and the records are read through the same snapshot, so an entry
				// without its record is corruption, not a race.
				return "", mongoerr.Newf(mongoerr.DataCorruptionDetected,
					"dbHash: _id index entry of %s points to a missing record %v", m.NS, cur.RecordID())
			}
			h.Write(raw)
		}
		if err := cur.Err(); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	if !m.Capped {
		return dbHashNoIDIndex, nil
	}
	cur, err := rd.Records(op.RU)
	if err != nil {
		return "", err
	}
	defer cur.Close()
	for i := 0; ; i++ {
		if i%1000 == 0 {
			if err := ddlCheckCtx(ctx); err != nil {
				return "", err
			}
		}
		_, raw, ok := cur.Next()
		if !ok {
			break
		}
		h.Write(raw)
	}
	if err := cur.Err(); err != nil {
		return "", fmt.Errorf("dbHash %s: %w", m.NS, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
