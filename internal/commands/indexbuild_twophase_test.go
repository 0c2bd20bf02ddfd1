package commands_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/repl/oplog"
	"humongo/internal/validate"
)

// cmdEntry is a command oplog entry: its command name, o field and the whole entry.
type cmdEntry struct {
	kind string
	o    bson.Raw
	raw  bson.Raw
}

func commandEntries(t *testing.T, n *outReplNode) []cmdEntry {
	t.Helper()
	var out []cmdEntry
	for _, e := range n.entries(t) {
		if e.Lookup("op").StringValue() != "c" {
			continue
		}
		o := bson.Raw(e.Lookup("o").Document())
		els, err := o.Elements()
		if err != nil || len(els) == 0 {
			t.Fatalf("bad command entry %s", e)
		}
		out = append(out, cmdEntry{kind: els[0].Key(), o: o, raw: e})
	}
	return out
}

func ofKind(es []cmdEntry, kind string) []cmdEntry {
	var out []cmdEntry
	for _, e := range es {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func insertN(t *testing.T, c *mongo.Collection, from, to int, f func(i int) bson.D) {
	t.Helper()
	var docs []any
	for i := from; i < to; i++ {
		docs = append(docs, f(i))
	}
	if _, err := c.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
}

func indexNames(t *testing.T, c *mongo.Collection) []string {
	t.Helper()
	cur, err := c.Indexes().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.M
	if err := cur.All(context.Background(), &specs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, fmt.Sprint(s["name"]))
	}
	return names
}

func hasName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// applyAll applies raw entries in order on node b, as its oplog applier would (command
// entries alone, each CRUD entry in its own unit).
func applyAll(t *testing.T, b *outReplNode, entries []bson.Raw) {
	t.Helper()
	ap := oplog.NewApplier(oplog.Config{Engine: b.db.Engine, Catalog: b.db.Catalog, Colls: b.db.Colls, TempDir: b.db.TempDir})
	ru := b.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	for _, e := range entries {
		if err := ap.Apply(context.Background(), ru, bsoncore.Document(e), oplog.ModeSecondary); err != nil {
			t.Fatalf("apply %s: %v", e, err)
		}
	}
}

// replayedSecondary opens a new node and applies a's whole oplog to it, as a secondary would.
func replayedSecondary(t *testing.T, a *outReplNode) *outReplNode {
	t.Helper()
	b := openOutReplNode(t, true)
	applyAll(t, b, a.entries(t))
	return b
}

// checkSecondaryBuildsDone checks that the oplog left no index build running on b and that ns
// validates there.
func checkSecondaryBuildsDone(t *testing.T, b *outReplNode, ns string) {
	t.Helper()
	if n := len(b.db.Colls.IndexBuilds().List()); n != 0 {
		t.Errorf("%d builds still running on the secondary", n)
	}
	validateNS(t, b, ns)
}

func validateNS(t *testing.T, n *outReplNode, ns string) {
	t.Helper()
	res, err := validate.Validate(context.Background(), n.db.Engine, n.db.Catalog, ns, true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || len(res.MissingIndexEntries) > 0 || len(res.ExtraIndexEntries) > 0 {
		for _, e := range res.ExtraIndexEntries {
			t.Logf("extra %s %v %s", e.IndexName, e.RecordID, bson.Raw(e.IndexKey))
		}
		for _, e := range res.MissingIndexEntries {
			t.Logf("missing %s %v %s %s", e.IndexName, e.RecordID, bson.Raw(e.IndexKey), bson.Raw(e.IDKey))
		}
		t.Fatalf("validate %s: valid=%v errors=%v missing=%d extra=%d", ns, res.Valid, res.Errors,
			len(res.MissingIndexEntries), len(res.ExtraIndexEntries))
	}
	t.Logf("validate %s: %d records, keys per index %v", ns, res.NRecords, res.KeysPerIndex)
}

// TestTwoPhaseIndexBuildOplog: createIndexes on a non-empty collection of a node that logs
// its writes replicates startIndexBuild and commitIndexBuild (same build UUID, the specs,
// the collection's ui) and no createIndexes entry; on an empty collection it stays a
// single-phase createIndexes entry. A node applying the oplog ends with a valid index.
func TestTwoPhaseIndexBuildOplog(t *testing.T) {
	ctx := context.Background()
	a := openOutReplNode(t, true)
	cl := a.client(t)
	coll := cl.Database("test").Collection("c")
	insertN(t, coll, 0, 3000, func(i int) bson.D {
		return bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 17}, {Key: "arr", Value: bson.A{i, i + 1}}}
	})

	// Writers keep going while the build runs: their keys reach the build's side table on
	// the primary, and their entries land between start and commit on the secondary.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 3000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i % 17}}); err != nil {
				t.Error(err)
				return
			}
			if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: i - 2900}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var reply bson.Raw
	reply, err := cl.Database("test").RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "arr", Value: 1}, {Key: "a", Value: -1}}}, {Key: "name", Value: "arr_a"}},
	}}}).Raw()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reply %s", reply)
	if q, _ := reply.Lookup("commitQuorum").StringValueOK(); q != "votingMembers" {
		t.Errorf("reply commitQuorum = %v, want votingMembers", reply.Lookup("commitQuorum"))
	}
	if n, _ := reply.Lookup("numIndexesAfter").AsInt64OK(); n != 3 {
		t.Errorf("numIndexesAfter = %d, want 3", n)
	}

	es := commandEntries(t, a)
	starts, commits := ofKind(es, "startIndexBuild"), ofKind(es, "commitIndexBuild")
	if len(starts) != 1 || len(commits) != 1 {
		t.Fatalf("startIndexBuild %d, commitIndexBuild %d entries, want 1 and 1", len(starts), len(commits))
	}
	if n := len(ofKind(es, "createIndexes")); n != 0 {
		t.Errorf("%d createIndexes entries for a two-phase build", n)
	}
	s, c := starts[0], commits[0]
	t.Logf("start %s\ncommit %s", s.raw, c.raw)
	for _, e := range []cmdEntry{s, c} {
		if v := e.o.Lookup(e.kind).StringValue(); v != "c" {
			t.Errorf("%s: collection %q", e.kind, v)
		}
		if ns := e.raw.Lookup("ns").StringValue(); ns != "test.$cmd" {
			t.Errorf("%s: ns %q", e.kind, ns)
		}
		if st, _, ok := e.o.Lookup("indexBuildUUID").BinaryOK(); !ok || st != 4 {
			t.Errorf("%s: indexBuildUUID %v", e.kind, e.o.Lookup("indexBuildUUID"))
		}
		idx, ok := e.o.Lookup("indexes").ArrayOK()
		if !ok {
			t.Fatalf("%s: no indexes array", e.kind)
		}
		vals, _ := idx.Values()
		if len(vals) != 2 || vals[0].Document().Lookup("name").StringValue() != "a_1" ||
			vals[1].Document().Lookup("name").StringValue() != "arr_a" {
			t.Errorf("%s: indexes %s", e.kind, idx)
		}
		if _, _, ok := e.raw.Lookup("ui").BinaryOK(); !ok {
			t.Errorf("%s: no ui", e.kind)
		}
	}
	if !s.o.Lookup("indexBuildUUID").Equal(c.o.Lookup("indexBuildUUID")) {
		t.Errorf("build UUIDs differ: %v vs %v", s.o.Lookup("indexBuildUUID"), c.o.Lookup("indexBuildUUID"))
	}
	st, si := s.raw.Lookup("ts").Timestamp()
	ct, ci := c.raw.Lookup("ts").Timestamp()
	if ct < st || (ct == st && ci <= si) {
		t.Errorf("commit ts %d:%d not after start ts %d:%d", ct, ci, st, si)
	}
	validateNS(t, a, "test.c")

	// Empty collection: single-phase.
	if _, err := cl.Database("test").Collection("empty").Indexes().CreateOne(ctx,
		mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	es = commandEntries(t, a)
	if n := len(ofKind(es, "createIndexes")); n != 1 {
		t.Errorf("createIndexes entries %d after an empty-collection build, want 1", n)
	}
	if n := len(ofKind(es, "startIndexBuild")); n != 1 {
		t.Errorf("startIndexBuild entries %d, want still 1", n)
	}

	// A secondary applying the oplog: startIndexBuild starts a background build, the
	// writes after it go through its side table, commitIndexBuild commits it.
	b := replayedSecondary(t, a)
	m, ok := b.db.Catalog.Latest().ByNS("test.c")
	if !ok {
		t.Fatal("secondary has no test.c")
	}
	for _, n := range []string{"a_1", "arr_a"} {
		ix, ok := m.Index(n)
		if !ok || !ix.Ready || ix.BuildUUID != nil {
			t.Fatalf("secondary index %s: %+v", n, ix)
		}
	}
	if ix, _ := m.Index("arr_a"); !ix.Multikey {
		t.Error("secondary arr_a not multikey")
	}
	checkSecondaryBuildsDone(t, b, "test.c")
}

// TestTwoPhaseIndexBuildAbort: a unique index over duplicates fails with DuplicateKey after
// replicating startIndexBuild and abortIndexBuild (cause 11000); no node keeps the index.
func TestTwoPhaseIndexBuildAbort(t *testing.T) {
	ctx := context.Background()
	a := openOutReplNode(t, true)
	cl := a.client(t)
	coll := cl.Database("test").Collection("d")
	insertN(t, coll, 0, 500, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}, {Key: "u", Value: i}} })
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "dup"}, {Key: "u", Value: 7}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "u", Value: 1}},
		Options: options.Index().SetUnique(true)})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 11000 {
		t.Fatalf("createIndexes unique over duplicates: %v, want DuplicateKey 11000", err)
	}
	es := commandEntries(t, a)
	starts, aborts := ofKind(es, "startIndexBuild"), ofKind(es, "abortIndexBuild")
	if len(starts) != 1 || len(aborts) != 1 || len(ofKind(es, "commitIndexBuild")) != 0 {
		t.Fatalf("entries: %d start, %d abort, %d commit", len(starts), len(aborts), len(ofKind(es, "commitIndexBuild")))
	}
	ab := aborts[0]
	t.Logf("abort entry %s", ab.raw)
	cause, ok := ab.o.Lookup("cause").DocumentOK()
	if !ok {
		t.Fatal("abortIndexBuild without cause")
	}
	if code, _ := cause.Lookup("code").AsInt64OK(); code != 11000 {
		t.Errorf("cause code %v", cause.Lookup("code"))
	}
	if n, _ := cause.Lookup("codeName").StringValueOK(); n != "DuplicateKey" {
		t.Errorf("cause codeName %q", n)
	}
	if !starts[0].o.Lookup("indexBuildUUID").Equal(ab.o.Lookup("indexBuildUUID")) {
		t.Error("start and abort build UUIDs differ")
	}
	if hasName(indexNames(t, coll), "u_1") {
		t.Error("primary kept u_1")
	}
	validateNS(t, a, "test.d")

	b := replayedSecondary(t, a)
	m, _ := b.db.Catalog.Latest().ByNS("test.d")
	if _, ok := m.Index("u_1"); ok {
		t.Error("secondary kept u_1")
	}
	checkSecondaryBuildsDone(t, b, "test.d")
}

// TestCommitQuorumArgument: commitQuorum values a one-member node can and cannot satisfy,
// and a standalone refusing the option.
func TestCommitQuorumArgument(t *testing.T) {
	ctx := context.Background()
	a := openOutReplNode(t, true)
	cl := a.client(t)
	db := cl.Database("test")
	insertN(t, db.Collection("q"), 0, 10, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}, {Key: "v", Value: i}} })
	create := func(db *mongo.Database, name string, q any) error {
		return db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "q"}, {Key: "indexes", Value: bson.A{
			bson.D{{Key: "key", Value: bson.D{{Key: name, Value: 1}}}, {Key: "name", Value: name}}}},
			{Key: "commitQuorum", Value: q}}).Err()
	}
	code := func(err error) int32 {
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			return ce.Code
		}
		return -1
	}
	for _, tc := range []struct {
		q    any
		want int32
	}{
		{int32(2), 278}, {"someTag", 278}, {int32(-1), 9}, {true, 9},
		{int32(0), 0}, {int32(1), 0}, {"majority", 0}, {"votingMembers", 0},
	} {
		name := fmt.Sprintf("f%v", tc.q)
		err := create(db, name, tc.q)
		if got := code(err); (tc.want == 0 && err != nil) || (tc.want != 0 && got != tc.want) {
			t.Errorf("commitQuorum %v: %v, want code %d", tc.q, err, tc.want)
		}
	}
	st := openOutReplNode(t, false)
	sdb := st.client(t).Database("test")
	insertN(t, sdb.Collection("q"), 0, 10, func(i int) bson.D { return bson.D{{Key: "_id", Value: i}} })
	if err := create(sdb, "v", int32(1)); code(err) != 2 {
		t.Errorf("standalone commitQuorum: %v, want BadValue", err)
	}
	if err := sdb.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "q"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "v", Value: 1}}}, {Key: "name", Value: "v_1"}}}}}).Err(); err != nil {
		t.Errorf("standalone createIndexes: %v", err)
	}
}
