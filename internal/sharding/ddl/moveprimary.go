package ddl

// movePrimary's steps on the shards (MongoDB 7.0's _shardsvrMovePrimary running the
// MovePrimaryCoordinator with the legacy cloner, and _shardsvrCloneCatalogData running the
// Cloner on the recipient; spec checklist-sharding.md "Database version": a primary change is
// DBV<uuid, Mod+1>). The database's primary shard (the donor) runs them in the resumable
// movePrimary coordinator (moveprimary_coordinator.go); here are the request's parsing, the
// listing of what moves, and the recipient's clone.
//
// Sharded collections stay where their chunks are; as 7.0's Cloner does, the recipient
// creates each one it lacks with the same UUID and options but neither indexes nor
// documents, so that the new primary lists them.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/routing"
)

// DatabaseCriticalSection is the shard's database critical section (the filtering runtime's).
type DatabaseCriticalSection interface {
	EnterDatabaseCriticalSection(db, reason string) error
	PromoteDatabaseCriticalSection(db string)
	ExitDatabaseCriticalSection(db string)
}

// ParseMovePrimary reads {<name>: "<db>", to: "<shard>"} as the MovePrimary IDL does, with
// _shardsvrMovePrimary's checks of the database name (the router makes them too: admin and
// config live on the config servers, which have no such command).
func ParseMovePrimary(cmd bsoncore.Document, name string) (db, to string, err error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return "", "", mongoerr.Newf(mongoerr.FailedToParse, "%s: empty command", name)
	}
	db, ok := first.Value().StringValueOK()
	if !ok {
		return "", "", mongoerr.New(mongoerr.InvalidNamespace, "'movePrimary' must be of type String")
	}
	v, lerr := cmd.LookupErr("to")
	if lerr != nil {
		return "", "", mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.to' is missing but a required field", name)
	}
	if to, ok = v.StringValueOK(); !ok {
		return "", "", mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.to' is the wrong type '%s', expected type 'string'",
			name, bsonutil.TypeName(v.Type))
	}
	if !configsvr.ValidDBName(db) {
		return "", "", mongoerr.Newf(mongoerr.InvalidNamespace, "invalid db name specified: %s", db)
	}
	if db == "admin" || db == "config" || db == "local" {
		return "", "", mongoerr.Newf(mongoerr.InvalidOptions, "Can't move primary for %s database", db)
	}
	if to == "" {
		return "", "", mongoerr.New(mongoerr.InvalidOptions, "you have to specify where you want to move it")
	}
	return db, to, nil
}

// withContext is uassertStatusOKWithContext: err's code, the context before its message.
func withContext(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if me, ok := mongoerr.As(err); ok {
		return mongoerr.New(me.Code, msg+" :: caused by :: "+me.Msg)
	}
	return fmt.Errorf("%s :: caused by :: %w", msg, err)
}

func staleDbInfo(db string, wanted routing.DatabaseVersion) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("db", db).AppendDocument("vWanted", wanted.Doc()).Build()
}

// clonable reports whether a collection of that name moves with its database as a
// collection: not a system collection, but for system.js (NamespaceString::
// isLegalClientSystemNS). system.views, which 7.0 clones as a collection, is not written by
// clients here: the views move as views (viewNames, cloneViews).
func clonable(coll string) bool {
	return !strings.HasPrefix(coll, "system.") || coll == "system.js"
}

func listViewsCmd() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("type", "view").Build()).Build()
}

// viewNames are the names of the views in a listCollections answer, sorted.
func viewNames(infos []bsoncore.Document) []string {
	var out []string
	for _, info := range infos {
		if name, _ := info.Lookup("name").StringValueOK(); name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// cloneViews creates here each view of db on the donor, as its listCollections entry
// (options: viewOn, pipeline, collation) defines it.
func cloneViews(ctx context.Context, local RunFunc, donor *client.ReplicaSet, db string) error {
	views, err := remoteCursorAll(ctx, donor, db, listViewsCmd())
	if err != nil {
		return err
	}
	for _, v := range views {
		name, _ := v.Lookup("name").StringValueOK()
		create := bsoncore.NewDocumentBuilder().AppendString("create", name)
		if opts, ok := v.Lookup("options").DocumentOK(); ok {
			elems, _ := opts.Elements()
			for _, e := range elems {
				create.AppendValue(e.Key(), e.Value())
			}
		}
		if _, err := local(ctx, db, create.Build()); err != nil {
			return fmt.Errorf("clone view %s.%s: %w", db, name, err)
		}
	}
	return nil
}

// unshardedCollections are the names of db's collections (type "collection", as listed by
// list) that are clonable and not sharded (no config.collections entry), sorted.
func unshardedCollections(ctx context.Context, remote *Remote, list func(context.Context, bsoncore.Document) ([]bsoncore.Document, error), db string) ([]string, error) {
	infos, err := list(ctx, listCollectionsCmd())
	if err != nil {
		return nil, err
	}
	sharded, err := shardedCollections(ctx, remote, db)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, info := range infos {
		name, _ := info.Lookup("name").StringValueOK()
		if name == "" || !clonable(name) || slices.Contains(sharded, name) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

func listCollectionsCmd() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("type", "collection").Build()).Build()
}

// shardedCollections are the names of db's collections with a config.collections entry
// (read at majority from the config servers).
func shardedCollections(ctx context.Context, remote *Remote, db string) ([]string, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "collections").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendDocument("_id", bsoncore.NewDocumentBuilder().
			AppendRegex("$regex", "^"+regexp.QuoteMeta(db)+`\.`, "").Build()).Build()).
		AppendDocument("projection", bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build()).
		AppendDocument("readConcern", bsoncore.NewDocumentBuilder().AppendString("level", "majority").Build()).Build()
	docs, err := remoteCursorAll(ctx, remote.Config(), "config", cmd)
	if err != nil {
		return nil, fmt.Errorf("read config.collections: %w", err)
	}
	var out []string
	for _, d := range docs {
		if ns, ok := d.Lookup("_id").StringValueOK(); ok {
			out = append(out, strings.TrimPrefix(ns, db+"."))
		}
	}
	return out, nil
}

// collectionNames lists db's collection names on rs.
func collectionNames(ctx context.Context, rs *client.ReplicaSet, db string) ([]string, error) {
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("listCollections", 1).AppendBoolean("nameOnly", true).Build()
	docs, err := remoteCursorAll(ctx, rs, db, cmd)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		if name, ok := d.Lookup("name").StringValueOK(); ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// remoteCursorAll runs a cursor command on rs's primary and follows it to the end
// (cursorAll over the remote set; getMores name the collection the cursor reports).
func remoteCursorAll(ctx context.Context, rs *client.ReplicaSet, db string, cmd bsoncore.Document) ([]bsoncore.Document, error) {
	run := func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
		return Run(ctx, rs, db, cmd)
	}
	return cursorAll(ctx, run, db, "", cmd)
}

// cloneBatchBytes bounds one insert of cloned documents (well under the 16 MB command size).
const cloneBatchBytes = 8 << 20

// CloneCatalogData is _shardsvrCloneCatalogData on the recipient (the Cloner's copyDb): the
// unsharded collections of db on the shard whose connection string is from are created here
// with their options (a UUID of their own), their indexes and their documents. A collection
// of the same name already here is NamespaceExists, nothing created for it. The database's
// sharded collections are created empty (createShardedShell). It returns the cloned
// namespaces (the unsharded ones), sorted.
func CloneCatalogData(ctx context.Context, local RunFunc, remote *Remote, db, from string) ([]string, error) {
	hosts, err := client.ParseReplicaSetHosts(from)
	if err != nil {
		return nil, err
	}
	donor, err := client.NewReplicaSet(hosts, remote.opts)
	if err != nil {
		return nil, err
	}
	defer func() { _ = donor.Close(context.WithoutCancel(ctx)) }()
	infos, err := remoteCursorAll(ctx, donor, db, listCollectionsCmd())
	if err != nil {
		return nil, err
	}
	byName := map[string]bsoncore.Document{}
	for _, info := range infos {
		name, _ := info.Lookup("name").StringValueOK()
		byName[name] = info
	}
	colls, err := unshardedCollections(ctx, remote, func(context.Context, bsoncore.Document) ([]bsoncore.Document, error) {
		return infos, nil
	}, db)
	if err != nil {
		return nil, err
	}
	var cloned []string
	for _, coll := range colls {
		if err := cloneCollection(ctx, local, donor, db, coll, byName[coll]); err != nil {
			return nil, err
		}
		cloned = append(cloned, db+"."+coll)
	}
	if err := cloneViews(ctx, local, donor, db); err != nil {
		return nil, err
	}
	// The sharded collections are created here too, with their UUID and options but neither
	// indexes nor documents (the Cloner's shardedColls): the new primary lists them, as
	// listCollections through a router asks the primary shard.
	sharded, err := shardedCollections(ctx, remote, db)
	if err != nil {
		return nil, err
	}
	for _, coll := range sharded {
		if info := byName[coll]; info != nil {
			if err := createShardedShell(ctx, local, db, coll, info); err != nil {
				return nil, err
			}
		}
	}
	return cloned, nil
}

// createShardedShell creates sharded collection db.coll as the donor's listCollections entry
// info says, with the donor's UUID; one already here with that UUID is kept.
func createShardedShell(ctx context.Context, local RunFunc, db, coll string, info bsoncore.Document) error {
	_, data, ok := info.Lookup("info", "uuid").BinaryOK()
	if !ok || len(data) != 16 {
		return mongoerr.Newf(mongoerr.InvalidUUID, "the donor listed %s.%s without its UUID", db, coll)
	}
	existing, err := LocalCollection(ctx, local, db, coll)
	if err != nil {
		return err
	}
	if existing.Exists() {
		donorUUID := catalog.UUID(data)
		if existing.UUID() == donorUUID {
			return nil
		}
		return mongoerr.Newf(mongoerr.InvalidOptions,
			"sharded collection with same namespace %s.%s already exists, but UUIDs don't match. Existing UUID is %s and new UUID is %s",
			db, coll, existing.UUID(), donorUUID)
	}
	opts, _ := info.Lookup("options").DocumentOK()
	cmd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrCreateCollectionParticipant", coll).
		AppendDocument("options", emptyIfNil(opts)).AppendBinary("collectionUUID", 4, data).
		AppendArray("indexes", bsoncore.NewArrayBuilder().Build()).Build()
	if _, err := local(ctx, db, cmd); err != nil {
		return fmt.Errorf("create sharded collection %s.%s on the new primary: %w", db, coll, err)
	}
	return nil
}

// cloneCollection creates db.coll here as info (a listCollections entry of the donor) says,
// builds the donor's indexes and copies its documents.
func cloneCollection(ctx context.Context, local RunFunc, donor *client.ReplicaSet, db, coll string, info bsoncore.Document) error {
	existing, err := LocalCollection(ctx, local, db, coll)
	if err != nil {
		return err
	}
	if existing.Exists() {
		return mongoerr.Newf(mongoerr.NamespaceExists, "unsharded collection with same namespace %s.%s already exists.", db, coll)
	}
	create := bsoncore.NewDocumentBuilder().AppendString("create", coll)
	if opts, ok := info.Lookup("options").DocumentOK(); ok {
		elems, _ := opts.Elements()
		for _, e := range elems {
			if e.Key() != "uuid" {
				create.AppendValue(e.Key(), e.Value())
			}
		}
	}
	if _, err := local(ctx, db, create.Build()); err != nil {
		return fmt.Errorf("clone %s.%s: %w", db, coll, err)
	}
	specs, err := remoteCursorAll(ctx, donor, db, bsoncore.NewDocumentBuilder().AppendString("listIndexes", coll).Build())
	if err != nil {
		return fmt.Errorf("clone the indexes of %s.%s: %w", db, coll, err)
	}
	ab := bsoncore.NewArrayBuilder()
	n := 0
	for _, spec := range specs {
		if name, _ := spec.Lookup("name").StringValueOK(); name == "_id_" {
			continue
		}
		b := bsoncore.NewDocumentBuilder()
		elems, _ := spec.Elements()
		for _, e := range elems {
			if e.Key() != "ns" {
				b.AppendValue(e.Key(), e.Value())
			}
		}
		ab.AppendDocument(b.Build())
		n++
	}
	if n > 0 {
		cmd := bsoncore.NewDocumentBuilder().AppendString("createIndexes", coll).AppendArray("indexes", ab.Build()).Build()
		if _, err := local(ctx, db, cmd); err != nil {
			return fmt.Errorf("clone the indexes of %s.%s: %w", db, coll, err)
		}
	}
	return copyDocuments(ctx, local, donor, db, coll)
}

// copyDocuments reads db.coll on the donor in natural order and inserts its documents here,
// in ordered batches (a capped collection keeps its order).
func copyDocuments(ctx context.Context, local RunFunc, donor *client.ReplicaSet, db, coll string) error {
	var batch []bsoncore.Document
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ab := bsoncore.NewArrayBuilder()
		for _, d := range batch {
			ab.AppendDocument(d)
		}
		cmd := bsoncore.NewDocumentBuilder().AppendString("insert", coll).AppendArray("documents", ab.Build()).
			AppendBoolean("ordered", true).AppendBoolean("bypassDocumentValidation", true).Build()
		reply, err := local(ctx, db, cmd)
		if err == nil {
			err = configsvr.WriteReplyError(reply)
		}
		if err != nil {
			return fmt.Errorf("clone the documents of %s.%s: %w", db, coll, err)
		}
		batch, size = batch[:0], 0
		return nil
	}
	find := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendInt32("batchSize", 1000).Build()
	reply, err := Run(ctx, donor, db, find)
	for field := "firstBatch"; ; field = "nextBatch" {
		if err != nil {
			return fmt.Errorf("read the documents of %s.%s on the donor: %w", db, coll, err)
		}
		arr, _ := reply.Lookup("cursor", field).ArrayOK()
		vals, _ := arr.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			if size+len(d) > cloneBatchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			batch = append(batch, append(bsoncore.Document(nil), d...))
			size += len(d)
		}
		if err := flush(); err != nil {
			return err
		}
		id, _ := reply.Lookup("cursor", "id").AsInt64OK()
		if id == 0 {
			return nil
		}
		reply, err = Run(ctx, donor, db, bsoncore.NewDocumentBuilder().AppendInt64("getMore", id).AppendString("collection", coll).
			AppendInt32("batchSize", 1000).Build())
	}
}
