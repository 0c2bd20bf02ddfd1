package router

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
)

func staleWriteError(index int) bson.D {
	return bson.D{{Key: "index", Value: int32(index)}, {Key: "code", Value: int32(mongoerr.StaleConfig)},
		{Key: "errmsg", Value: "placement version mismatch"}, {Key: "errInfo", Value: bson.D{{Key: "ns", Value: "app.s"}}}}
}

func newTestBatch(ordered bool, n int) *writeBatch {
	b := &writeBatch{c: &Cluster{Cache: catalogcache.New(nil)}, kind: kindInsert, ns: "app.s", db: "app", coll: "s",
		ordered: ordered, errs: map[int]bsoncore.Document{}}
	for i := 0; i < n; i++ {
		b.stmts = append(b.stmts, mustDoc(bson.D{{Key: "_id", Value: i}}))
	}
	return b
}

// A stale answer sends again only the statements the shard did not run: in an ordered
// sub-batch the stale one and those after it; in an unordered one those answered stale. Other
// errors keep the client's indexes; a failed sub-batch fails its statements (only the first
// when ordered).
func TestWriteBatchAbsorbStale(t *testing.T) {
	b := newTestBatch(true, 4)
	again, stale := b.absorb([]*subBatch{{shard: "shard0", stmts: []int{0, 1, 2},
		reply: mustDoc(bson.D{{Key: "n", Value: 1}, {Key: "writeErrors", Value: bson.A{staleWriteError(1)}}})}}, nil)
	if stale == nil || !slices.Equal(again, []int{1, 2}) || b.n != 1 || len(b.errs) != 0 {
		t.Fatalf("ordered: again %v stale %v n %d errs %v", again, stale, b.n, b.errs)
	}

	b = newTestBatch(false, 6)
	dup := bson.D{{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(mongoerr.DuplicateKey)}, {Key: "errmsg", Value: "E11000"}}
	again, stale = b.absorb([]*subBatch{
		{shard: "shard0", stmts: []int{0, 2, 4}, reply: mustDoc(bson.D{{Key: "n", Value: 2}, {Key: "writeErrors", Value: bson.A{staleWriteError(1)}}})},
		{shard: "shard1", stmts: []int{1, 3}, reply: mustDoc(bson.D{{Key: "n", Value: 1}, {Key: "writeErrors", Value: bson.A{dup}}})},
		{shard: "shard2", stmts: []int{5}, err: mongoerr.New(mongoerr.HostUnreachable, "down")},
	}, nil)
	if stale == nil || !slices.Equal(again, []int{2}) || b.n != 3 {
		t.Fatalf("unordered: again %v stale %v n %d", again, stale, b.n)
	}
	reply := b.reply()
	var r writeReply
	if err := bson.Unmarshal(reply, &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(errIndexes(r), []int32{1, 5}) || r.WriteErrors[0].Code != int32(mongoerr.DuplicateKey) ||
		r.WriteErrors[1].Code != int32(mongoerr.HostUnreachable) {
		t.Fatalf("unordered reply: %s", bson.Raw(reply))
	}

	// A whole sub-batch answered StaleDbVersion goes again entirely.
	b = newTestBatch(false, 2)
	again, stale = b.absorb([]*subBatch{{shard: "shard0", stmts: []int{0, 1},
		err: mongoerr.New(mongoerr.StaleDbVersion, "stale db").WithInfo(mustDoc(bson.D{{Key: "db", Value: "app"}}))}}, nil)
	if stale == nil || !slices.Equal(again, []int{0, 1}) {
		t.Fatalf("stale sub-batch: again %v stale %v", again, stale)
	}
}

// Write concern errors merge as MongoDB 7.0's mergeWriteConcernErrors.
func TestMergeWCErrors(t *testing.T) {
	wce := func(code mongoerr.Code, msg string) bsoncore.Document {
		return mustDoc(bson.D{{Key: "code", Value: int32(code)}, {Key: "errmsg", Value: msg}})
	}
	one := mergeWCErrors([]shardWCError{{shard: "shard0", doc: wce(mongoerr.WriteConcernFailed, "waiting for replication timed out")}})
	if m, _ := one.Lookup("errmsg").StringValueOK(); m != "WriteConcernFailed: waiting for replication timed out at shard0" {
		t.Fatalf("one: %s", one)
	}
	two := mergeWCErrors([]shardWCError{{shard: "shard0", doc: wce(mongoerr.UnsatisfiableWriteConcern, "a")},
		{shard: "shard1", doc: wce(mongoerr.WriteConcernFailed, "b")}})
	if m, _ := two.Lookup("errmsg").StringValueOK(); m != "Multiple errors reported :: UnsatisfiableWriteConcern: a at shard0 :: and :: WriteConcernFailed: b at shard1" ||
		two.Lookup("code").Int32() != int32(mongoerr.WriteConcernFailed) {
		t.Fatalf("two: %s", two)
	}
}
