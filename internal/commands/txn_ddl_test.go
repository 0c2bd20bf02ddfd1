package commands_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
)

// txnStmt adds a transaction's session fields to cmd: statement of transaction txn on lsid,
// the first one when start.
func txnStmt(lsid bson.D, cmd bson.D, txn int64, start bool) bson.D {
	cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txn}, bson.E{Key: "autocommit", Value: false})
	if start {
		cmd = append(cmd, bson.E{Key: "startTransaction", Value: true})
	}
	return cmd
}

// collNames lists db's collections as an operation outside any transaction sees them.
func collNames(t *testing.T, r *retryRS, db string) map[string]bool {
	t.Helper()
	reply := r.must(t, db, bson.D{{Key: "listCollections", Value: 1}, {Key: "nameOnly", Value: true}})
	vals, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	out := map[string]bool{}
	for _, v := range vals {
		out[v.Document().Lookup("name").StringValue()] = true
	}
	return out
}

func txnIndexNames(t *testing.T, r *retryRS, db, coll string) map[string]bool {
	t.Helper()
	reply := r.must(t, db, bson.D{{Key: "listIndexes", Value: coll}})
	vals, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	out := map[string]bool{}
	for _, v := range vals {
		out[v.Document().Lookup("name").StringValue()] = true
	}
	return out
}

// A transaction creates a collection, an index on it and writes to it: nobody outside sees
// any of it before the commit; afterwards the collection has its index, which holds the
// transaction's documents, and the applyOps entry carries create, createIndexes and the
// insert (what a secondary applies, oplog/txn_apply.go).
func TestTransactionCreatesCollectionAndIndex(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "create", Value: "newc"}}, 1, true))
	reply := r.must(t, "test", txnStmt(lsid, bson.D{{Key: "createIndexes", Value: "newc"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}, {Key: "unique", Value: true}}}}}, 1, false))
	if n, _ := reply.Lookup("numIndexesAfter").AsInt64OK(); n != 2 {
		t.Fatalf("createIndexes in transaction: %v", reply)
	}
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "newc"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 7}}}}}, 1, false))
	// An array makes the new index multikey, inside the transaction.
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "newc"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: bson.A{8, 9}}}}}}, 1, false))
	// Implicit creation by insert, in the same transaction.
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "implicit"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}}, 1, false))
	// The transaction reads its own collection (through the new index too).
	reply = r.must(t, "test", txnStmt(lsid, bson.D{{Key: "find", Value: "newc"}, {Key: "filter", Value: bson.D{{Key: "x", Value: 7}}}, {Key: "hint", Value: "x_1"}}, 1, false))
	if docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values(); len(docs) != 1 {
		t.Fatalf("find inside the transaction: %v", reply)
	}
	// A duplicate key inside the transaction is caught by the transaction's own index: the
	// statement fails and aborts it, so this runs in a second transaction below instead.

	names := collNames(t, r, "test")
	if names["newc"] || names["implicit"] {
		t.Fatalf("uncommitted collections visible outside: %v", names)
	}
	wantErrCode(t, r.run(t, "test", bson.D{{Key: "listIndexes", Value: "newc"}}), mongoerr.NamespaceNotFound)
	if docs := r.find(t, "test.newc", bson.D{}); len(docs) != 0 {
		t.Fatalf("uncommitted documents visible outside: %v", docs)
	}

	r.must(t, "admin", txnStmt(lsid, bson.D{{Key: "commitTransaction", Value: 1}}, 1, false))
	names = collNames(t, r, "test")
	if !names["newc"] || !names["implicit"] {
		t.Fatalf("committed collections missing: %v", names)
	}
	if ix := txnIndexNames(t, r, "test", "newc"); !ix["x_1"] || !ix["_id_"] {
		t.Fatalf("indexes after commit: %v", ix)
	}
	// The unique index holds the transaction's document.
	reply = r.run(t, "test", bson.D{{Key: "insert", Value: "newc"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 7}}}}})
	if c, _ := reply.Lookup("writeErrors", "0", "code").AsInt64OK(); c != int64(mongoerr.DuplicateKey) {
		t.Fatalf("insert of a duplicate x after the commit: %v", reply)
	}
	if docs := r.find(t, "test.newc", bson.D{{Key: "x", Value: 7}}); len(docs) != 1 {
		t.Fatalf("after commit: %v", docs)
	}
	reply = r.must(t, "test", bson.D{{Key: "find", Value: "newc"}, {Key: "filter", Value: bson.D{{Key: "x", Value: 9}}}, {Key: "hint", Value: "x_1"}})
	if docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values(); len(docs) != 1 {
		t.Fatalf("multikey lookup after commit: %v", reply)
	}

	entries := r.find(t, "local.oplog.rs", bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}})
	if len(entries) != 1 {
		t.Fatalf("want one applyOps entry, got %v", entries)
	}
	ops, _ := entries[0].Lookup("o", "applyOps").Array().Values()
	var kinds []string
	for _, v := range ops {
		op := v.Document()
		k := op.Lookup("op").StringValue()
		if k == "c" {
			first := op.Lookup("o").Document().Index(0)
			k += ":" + first.Key() + ":" + first.Value().StringValue()
			if op.Lookup("ns").StringValue() != "test.$cmd" || op.Lookup("ui").Type == 0 {
				t.Fatalf("command op: %v", op)
			}
			if first.Key() == "createIndexes" {
				if name, _ := op.Lookup("o", "name").StringValueOK(); name != "x_1" {
					t.Fatalf("createIndexes op: %v", op)
				}
			}
		}
		kinds = append(kinds, k)
	}
	want := []string{"c:create:newc", "c:createIndexes:newc", "i", "i", "c:create:implicit", "i"}
	if len(kinds) != len(want) {
		t.Fatalf("applyOps ops %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("applyOps ops %v, want %v", kinds, want)
		}
	}

	// A second transaction: a duplicate key against the index it created fails the
	// statement.
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "createIndexes", Value: "other"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "y", Value: 1}}}, {Key: "name", Value: "y_1"}, {Key: "unique", Value: true}}}}}, 2, true))
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "other"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "y", Value: 1}}}}}, 2, false))
	wantErrCode(t, r.run(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "other"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}, {Key: "y", Value: 1}}}}}, 2, false)), mongoerr.DuplicateKey)
	if collNames(t, r, "test")["other"] {
		t.Fatal("collection of an aborted transaction exists")
	}
}

// An aborted transaction's collections and indexes are gone, and their names are free again,
// for other clients and for the next transaction.
func TestTransactionDDLAbortLeavesNothing(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "create", Value: "a"}}, 1, true))
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "b"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, 1, false))
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}, 1, false))
	r.must(t, "admin", txnStmt(lsid, bson.D{{Key: "abortTransaction", Value: 1}}, 1, false))
	if names := collNames(t, r, "test"); len(names) != 0 {
		t.Fatalf("collections of an aborted transaction: %v", names)
	}
	if e := r.find(t, "local.oplog.rs", bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}}); len(e) != 0 {
		t.Fatalf("aborted transaction logged: %v", e)
	}
	r.must(t, "test", bson.D{{Key: "create", Value: "a"}})
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "create", Value: "b"}}, 2, true))
	r.must(t, "admin", txnStmt(lsid, bson.D{{Key: "commitTransaction", Value: 1}}, 2, false))
	if names := collNames(t, r, "test"); !names["a"] || !names["b"] || names["c"] {
		t.Fatalf("collections: %v", names)
	}
	if ix := txnIndexNames(t, r, "test", "b"); len(ix) != 1 {
		t.Fatalf("indexes of b: %v", ix)
	}
}

// What a transaction may not create fails with MongoDB's codes.
func TestTransactionDDLRefusals(t *testing.T) {
	r := startRetryRS(t)
	r.must(t, "test", bson.D{{Key: "createIndexes", Value: "exists"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}})
	lsid := newLsid()
	txn := int64(0)
	first := func(db string, cmd bson.D) bson.Raw {
		txn++
		return r.run(t, db, txnStmt(lsid, cmd, txn, true))
	}
	// create of an existing collection, even with the same options.
	wantErrCode(t, first("test", bson.D{{Key: "create", Value: "exists"}}), mongoerr.NamespaceExists)
	// A new index on a collection the transaction did not create.
	wantErrCode(t, first("test", bson.D{{Key: "createIndexes", Value: "exists"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "y", Value: 1}}}, {Key: "name", Value: "y_1"}}}}}), mongoerr.OperationNotSupportedInTransaction)
	// An index that exists already is fine there.
	reply := first("test", bson.D{{Key: "createIndexes", Value: "exists"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}})
	if note, _ := reply.Lookup("note").StringValueOK(); note != "all indexes already exist" {
		t.Fatalf("existing index in a transaction: %v", reply)
	}
	// An index on a collection the transaction created and filled.
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "filled"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, txn, false))
	wantErrCode(t, r.run(t, "test", txnStmt(lsid, bson.D{{Key: "createIndexes", Value: "filled"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "z", Value: 1}}}, {Key: "name", Value: "z_1"}}}}}, txn, false)), mongoerr.OperationNotSupportedInTransaction)
	// Explicit creation needs read concern local.
	snapshot := bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}
	wantErrCode(t, first("test", bson.D{{Key: "create", Value: "snap"}, snapshot}), mongoerr.InvalidOptions)
	wantErrCode(t, first("test", bson.D{{Key: "createIndexes", Value: "snap"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}, snapshot}), mongoerr.InvalidOptions)
	// Views, system collections and the admin database.
	wantErrCode(t, first("test", bson.D{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "exists"}}), mongoerr.OperationNotSupportedInTransaction)
	wantErrCode(t, first("test", bson.D{{Key: "create", Value: "system.js"}}), mongoerr.OperationNotSupportedInTransaction)
	wantErrCode(t, first("admin", bson.D{{Key: "create", Value: "x"}}), mongoerr.OperationNotSupportedInTransaction)
	if names := collNames(t, r, "test"); len(names) != 1 || !names["exists"] {
		t.Fatalf("collections after refusals: %v", names)
	}
}

// A transaction that created a collection does not hold the catalog's DDL mutex between its
// statements: other clients' DDL on other namespaces completes while it is open. DDL on the
// namespace it created waits for it (a WriteConflict retried until the transaction ends,
// bounded by the waiter's maxTimeMS), and a second transaction creating the same namespace
// fails at once with a transient WriteConflict.
func TestTransactionDDLDoesNotBlockOtherDDL(t *testing.T) {
	r := startRetryRS(t)
	cl := txnClient(t, r)
	lsid := newLsid()
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "create", Value: "mine"}}, 1, true))
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "createIndexes", Value: "mine"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}, 1, false))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db := cl.Database("test")
	if err := db.CreateCollection(ctx, "theirs"); err != nil {
		t.Fatalf("create of another namespace during the transaction: %v", err)
	}
	if _, err := db.Collection("theirs").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "y", Value: 1}}}); err != nil {
		t.Fatalf("createIndexes on another namespace during the transaction: %v", err)
	}
	if err := db.Collection("theirs").Drop(ctx); err != nil {
		t.Fatalf("drop of another namespace during the transaction: %v", err)
	}

	// The same namespace: a plain create waits, bounded by its maxTimeMS.
	reply := r.run(t, "test", bson.D{{Key: "create", Value: "mine"}, {Key: "maxTimeMS", Value: 200}})
	wantErrCode(t, reply, mongoerr.MaxTimeMSExpired)
	// Another transaction creating it conflicts at once, as a transient error.
	other := newLsid()
	reply = r.run(t, "test", txnStmt(other, bson.D{{Key: "insert", Value: "mine"}, {Key: "documents", Value: bson.A{bson.D{}}}}, 1, true))
	wantErrCode(t, reply, mongoerr.WriteConflict)
	if labels, _ := reply.Lookup("errorLabels").Array().Values(); len(labels) != 1 || labels[0].StringValue() != "TransientTransactionError" {
		t.Fatalf("labels: %v", reply)
	}

	// A plain insert into it waits for the commit, then writes into the committed collection.
	done := make(chan error, 1)
	go func() {
		_, err := db.Collection("mine").InsertOne(ctx, bson.D{{Key: "_id", Value: "after"}, {Key: "x", Value: 1}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("insert into the transaction's uncommitted collection did not wait: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The waiter does not hold the collection's lock between its attempts: the transaction
	// still writes to its collection (its lock requests give up after 5 ms).
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "mine"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "txn"}, {Key: "x", Value: 2}}}}}, 1, false))
	r.must(t, "admin", txnStmt(lsid, bson.D{{Key: "commitTransaction", Value: 1}}, 1, false))
	if err := <-done; err != nil {
		t.Fatalf("insert after the commit: %v", err)
	}
	if ix := txnIndexNames(t, r, "test", "mine"); !ix["x_1"] {
		t.Fatalf("indexes: %v", ix)
	}
	if docs := r.find(t, "test.mine", bson.D{}); len(docs) != 2 {
		t.Fatalf("documents of mine: %v", docs)
	}
}

// Upserts create their collection inside the transaction too, and the transaction's reads
// (aggregate, distinct, find) see the new collections and their default collation.
func TestTransactionUpsertsCreateCollections(t *testing.T) {
	r := startRetryRS(t)
	lsid := newLsid()
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "findAndModify", Value: "fam"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "upsert", Value: true}}, 1, true))
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "update", Value: "upd"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: "a"}}}}}, {Key: "upsert", Value: true}}}}}, 1, false))
	reply := r.must(t, "test", txnStmt(lsid, bson.D{{Key: "aggregate", Value: "fam"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$count", Value: "n"}}}},
		{Key: "cursor", Value: bson.D{}}}, 1, false))
	if n, _ := reply.Lookup("cursor", "firstBatch", "0", "n").AsInt64OK(); n != 1 {
		t.Fatalf("aggregate inside the transaction: %v", reply)
	}
	reply = r.must(t, "test", txnStmt(lsid, bson.D{{Key: "distinct", Value: "upd"}, {Key: "key", Value: "w"}}, 1, false))
	if vals, _ := reply.Lookup("values").Array().Values(); len(vals) != 1 {
		t.Fatalf("distinct inside the transaction: %v", reply)
	}
	// A collection created with a default collation: the transaction's reads use it.
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "create", Value: "coll"}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}}}}, 1, false))
	r.must(t, "test", txnStmt(lsid, bson.D{{Key: "insert", Value: "coll"}, {Key: "documents", Value: bson.A{bson.D{{Key: "s", Value: "a"}}, bson.D{{Key: "s", Value: "A"}}}}}, 1, false))
	for _, cmd := range []bson.D{
		{{Key: "aggregate", Value: "coll"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "s", Value: "a"}}}}}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "find", Value: "coll"}, {Key: "filter", Value: bson.D{{Key: "s", Value: "a"}}}},
	} {
		reply = r.must(t, "test", txnStmt(lsid, cmd, 1, false))
		if docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values(); len(docs) != 2 {
			t.Fatalf("%v inside the transaction ignores the new collection's collation: %v", cmd[0].Key, reply)
		}
	}
	if names := collNames(t, r, "test"); len(names) != 0 {
		t.Fatalf("uncommitted collections visible outside: %v", names)
	}
	r.must(t, "admin", txnStmt(lsid, bson.D{{Key: "commitTransaction", Value: 1}}, 1, false))
	if docs := r.find(t, "test.fam", bson.D{}); len(docs) != 1 {
		t.Fatalf("fam after commit: %v", docs)
	}
	if docs := r.find(t, "test.upd", bson.D{}); len(docs) != 1 {
		t.Fatalf("upd after commit: %v", docs)
	}
}
