package event

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/oplog"
)

var (
	collA   = Scope{Kind: ScopeCollection, DB: "test", Coll: "a"}
	dbTest  = Scope{Kind: ScopeDatabase, DB: "test"}
	cluster = Scope{Kind: ScopeCluster}
)

func opts(s Scope, expanded bool) *Options {
	return &Options{Scope: s, ShowExpandedEvents: expanded, MakeID: testID}
}

// TestCRUDEvents compares whole event documents with MongoDB's (field order included;
// MongoDB's document_source_change_stream_test.cpp shapes).
func TestCRUDEvents(t *testing.T) {
	id1 := bson.D{{Key: "_id", Value: int32(1)}}
	full := bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: "y"}}
	diffO := bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: bson.D{
		{Key: "d", Value: bson.D{{Key: "gone", Value: false}}},
		{Key: "u", Value: bson.D{{Key: "a", Value: int32(2)}}},
		{Key: "i", Value: bson.D{{Key: "b", Value: int32(3)}}},
		{Key: "sarr", Value: bson.D{{Key: "a", Value: true}, {Key: "l", Value: int32(1)}}},
	}}}
	upDesc := bson.D{{Key: "updatedFields", Value: bson.D{{Key: "a", Value: int32(2)}, {Key: "b", Value: int32(3)}}},
		{Key: "removedFields", Value: bson.A{"gone"}},
		{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "arr"}, {Key: "newSize", Value: int32(1)}}}}}
	upDescExp := append(upDesc[:3:3], bson.E{Key: "disambiguatedPaths", Value: bson.D{}})

	for _, tc := range []struct {
		name     string
		entry    bson.D
		expanded bool
		shardKey bsoncore.Document
		want     bson.D
	}{
		{"insert", crud("i", "test.a", uuidA, full, nil, 10), false, nil, bson.D{
			{Key: "_id", Value: id(10, 0, &uuidA, bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: id1}}, false)},
			{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: ts(10)}, {Key: "wallTime", Value: wall},
			{Key: "fullDocument", Value: full}, {Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: id1}}},
		{"insert expanded", crud("i", "test.a", uuidA, full, nil, 10), true, nil, bson.D{
			{Key: "_id", Value: id(10, 0, &uuidA, bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: id1}}, false)},
			{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: ts(10)}, {Key: "collectionUUID", Value: bin(uuidA)},
			{Key: "wallTime", Value: wall}, {Key: "fullDocument", Value: full}, {Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: id1}}},
		{"insert sharded: shard key then _id, missing fields null", crud("i", "test.a", uuidA, full, nil, 10), false,
			doc(t, bson.D{{Key: "x", Value: int32(1)}, {Key: "m.n", Value: "hashed"}}), bson.D{
				{Key: "_id", Value: id(10, 0, &uuidA, bson.D{{Key: "operationType", Value: "insert"},
					{Key: "documentKey", Value: bson.D{{Key: "x", Value: "y"}, {Key: "m.n", Value: nil}, {Key: "_id", Value: int32(1)}}}}, false)},
				{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: ts(10)}, {Key: "wallTime", Value: wall},
				{Key: "fullDocument", Value: full}, {Key: "ns", Value: nsD("test", "a")},
				{Key: "documentKey", Value: bson.D{{Key: "x", Value: "y"}, {Key: "m.n", Value: nil}, {Key: "_id", Value: int32(1)}}}}},
		{"update", crud("u", "test.a", uuidA, diffO, id1, 11), false, nil, bson.D{
			{Key: "_id", Value: id(11, 0, &uuidA, bson.D{{Key: "operationType", Value: "update"}, {Key: "documentKey", Value: id1}}, false)},
			{Key: "operationType", Value: "update"}, {Key: "clusterTime", Value: ts(11)}, {Key: "wallTime", Value: wall},
			{Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: id1}, {Key: "updateDescription", Value: upDesc}}},
		{"update expanded", crud("u", "test.a", uuidA, diffO, id1, 11), true, nil, bson.D{
			{Key: "_id", Value: id(11, 0, &uuidA, bson.D{{Key: "operationType", Value: "update"}, {Key: "documentKey", Value: id1}}, false)},
			{Key: "operationType", Value: "update"}, {Key: "clusterTime", Value: ts(11)}, {Key: "collectionUUID", Value: bin(uuidA)},
			{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: id1},
			{Key: "updateDescription", Value: upDescExp}}},
		{"replace", crud("u", "test.a", uuidA, full, id1, 12), false, nil, bson.D{
			{Key: "_id", Value: id(12, 0, &uuidA, bson.D{{Key: "operationType", Value: "replace"}, {Key: "documentKey", Value: id1}}, false)},
			{Key: "operationType", Value: "replace"}, {Key: "clusterTime", Value: ts(12)}, {Key: "wallTime", Value: wall},
			{Key: "fullDocument", Value: full}, {Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: id1}}},
		{"delete", crud("d", "test.a", uuidA, id1, nil, 13), false, nil, bson.D{
			{Key: "_id", Value: id(13, 0, &uuidA, bson.D{{Key: "operationType", Value: "delete"}, {Key: "documentKey", Value: id1}}, false)},
			{Key: "operationType", Value: "delete"}, {Key: "clusterTime", Value: ts(13)}, {Key: "wallTime", Value: wall},
			{Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: id1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts(collA, tc.expanded)
			if tc.shardKey != nil {
				o.ShardKey = func(u catalog.UUID) bsoncore.Document {
					if u != uuidA {
						t.Errorf("ShardKey(%v)", u)
					}
					return tc.shardKey
				}
			}
			evs, err := Transform(nil, parse(t, tc.entry), o)
			if err != nil {
				t.Fatal(err)
			}
			checkDocs(t, evs, []bson.D{tc.want})
			ev := evs[0]
			if ev.ClusterTime != tsOf(tc.want[2].Value.(bson.Timestamp).T) || ev.ApplyOpsTS != ev.ClusterTime || ev.ApplyOpsIndex != 0 ||
				!ev.HasUUID || ev.UUID != uuidA || ev.NS != "test.a" || ev.Invalidate {
				t.Errorf("event fields %+v", ev)
			}
			switch ev.OperationType {
			case OpUpdate:
				if !ev.NeedsPreImage || !ev.NeedsPostImage || ev.RawUpdate == nil {
					t.Errorf("update needs both images: %+v", ev)
				}
			case OpReplace, OpDelete:
				if !ev.NeedsPreImage || ev.NeedsPostImage {
					t.Errorf("%s needs the pre image only: %+v", ev.OperationType, ev)
				}
			case OpInsert:
				if ev.NeedsPreImage || ev.NeedsPostImage {
					t.Errorf("insert needs no image")
				}
			}
		})
	}
}

// TestUpdateFromWriterDiff: an update logged as the writer logs it (UpdateO of pre and post)
// gives MongoDB's updateDescription; a replacement-sized change is a replace event.
func TestUpdateFromWriterDiff(t *testing.T) {
	long := strings.Repeat("z", 64)
	pre := doc(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}, {Key: "arr", Value: bson.A{int32(1), int32(2), int32(3)}},
		{Key: "grow", Value: bson.A{int32(1)}}, {Key: "gone", Value: true}, {Key: "pad", Value: long}})
	post := doc(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(2)}, {Key: "arr", Value: bson.A{int32(1), int32(2)}},
		{Key: "grow", Value: bson.A{int32(1), int32(2)}}, {Key: "pad", Value: long}, {Key: "new", Value: "n"}})
	o, err := oplog.UpdateO(pre, post)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := Transform(nil, parse(t, crud("u", "test.a", uuidA, bson.Raw(o), bson.D{{Key: "_id", Value: int32(1)}}, 5)), &Options{Scope: collA})
	if err != nil {
		t.Fatal(err)
	}
	ud := evs[0].Doc.Lookup("updateDescription")
	want := raw(t, bson.D{
		{Key: "updatedFields", Value: bson.D{{Key: "a", Value: int32(2)}, {Key: "new", Value: "n"}, {Key: "grow.1", Value: int32(2)}}},
		{Key: "removedFields", Value: bson.A{"gone"}},
		{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "arr"}, {Key: "newSize", Value: int32(2)}}}}})
	if got := ud.Document(); string(got) != string(want) {
		t.Errorf("updateDescription (o %s):\n got  %s\n want %s", bson.Raw(o), bson.Raw(got), want)
	}

	// A change the differ logs as the whole post image is a replace.
	small := doc(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "b", Value: int32(1)}})
	o, _ = oplog.UpdateO(pre, small)
	evs, err = Transform(nil, parse(t, crud("u", "test.a", uuidA, bson.Raw(o), bson.D{{Key: "_id", Value: int32(1)}}, 5)), &Options{Scope: collA})
	if err != nil || evs[0].OperationType != OpReplace || string(evs[0].Doc.Lookup("fullDocument").Document()) != string(small) {
		t.Errorf("replacement: %v %v", evs, err)
	}
}

func TestRawUpdateDescription(t *testing.T) {
	o := bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: bson.D{{Key: "u", Value: bson.D{{Key: "a", Value: int32(2)}}}}}}
	evs, err := Transform(nil, parse(t, crud("u", "test.a", uuidA, o, bson.D{{Key: "_id", Value: int32(1)}}, 5)),
		&Options{Scope: collA, ShowRawUpdateDescription: true})
	if err != nil {
		t.Fatal(err)
	}
	checkDocs(t, evs, []bson.D{{{Key: "operationType", Value: "update"}, {Key: "clusterTime", Value: ts(5)}, {Key: "wallTime", Value: wall},
		{Key: "ns", Value: nsD("test", "a")}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(1)}}},
		{Key: "rawUpdateDescription", Value: o}}})
}

func TestBadUpdateEntries(t *testing.T) {
	for _, tc := range []struct {
		o    bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "$v", Value: int32(1)}, {Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, mongoerr.Location6741200},
		{bson.D{{Key: "a", Value: 1}}, mongoerr.Location6741200}, // neither diff nor replacement (no _id)
		{bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: 1}}, mongoerr.Location40532},
		{bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: bson.D{{Key: "x", Value: 1}}}}, mongoerr.BadValue},
	} {
		_, err := Transform(nil, parse(t, crud("u", "test.a", uuidA, tc.o, bson.D{{Key: "_id", Value: 1}}, 5)), &Options{Scope: collA})
		if mongoerr.CodeOf(err) != tc.code {
			t.Errorf("o %v: err %v, want code %v", tc.o, err, tc.code)
		}
	}
	// A CRUD entry without ui.
	e := crud("i", "test.a", uuidA, bson.D{{Key: "_id", Value: 1}}, nil, 5)
	e = append(e[:2], e[3:]...)
	if _, err := Transform(nil, parse(t, e), &Options{Scope: collA}); mongoerr.CodeOf(err) != mongoerr.Location7826901 {
		t.Errorf("insert without ui: %v", err)
	}
}

// TestCommandEvents covers the DDL entries as the writer logs them (writer.go,
// indexbuild_log.go): classic events, expanded events and the invalidate that follows.
func TestCommandEvents(t *testing.T) {
	idIndex := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}
	xSpec := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "x", Value: int32(1)}}}, {Key: "name", Value: "x_1"}}
	commitO, err := oplog.IndexBuildO("commitIndexBuild", "test.a", uuidB, []bsoncore.Document{doc(t, xSpec)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	startO, _ := oplog.IndexBuildO("startIndexBuild", "test.a", uuidB, []bsoncore.Document{doc(t, xSpec)}, nil)
	renameO := bson.D{{Key: "renameCollection", Value: "test.a"}, {Key: "to", Value: "test.b"}, {Key: "stayTemp", Value: false}}
	renameDropO := bson.D{{Key: "renameCollection", Value: "test.c"}, {Key: "to", Value: "test.a"}, {Key: "stayTemp", Value: false}, {Key: "dropTarget", Value: bin(uuidB)}}
	toB := nsD("test", "b")
	inv := func(secs uint32, u *catalog.UUID, eid bson.D) bson.D {
		return bson.D{{Key: "_id", Value: id(secs, 0, u, eid, true)}, {Key: "operationType", Value: "invalidate"},
			{Key: "clusterTime", Value: ts(secs)}, {Key: "wallTime", Value: wall}}
	}
	dropEID := bson.D{{Key: "operationType", Value: "drop"}}
	renEID := bson.D{{Key: "operationType", Value: "rename"}, {Key: "operationDescription", Value: bson.D{{Key: "to", Value: toB}}}}
	renDropDesc := bson.D{{Key: "to", Value: nsD("test", "a")}, {Key: "dropTarget", Value: bin(uuidB)}}
	createDesc := bson.D{{Key: "idIndex", Value: idIndex}}
	ixDesc := bson.D{{Key: "indexes", Value: bson.A{xSpec}}}
	ddEID := bson.D{{Key: "operationType", Value: "dropDatabase"}}

	for _, tc := range []struct {
		name     string
		scope    Scope
		expanded bool
		entry    bson.D
		want     []bson.D
	}{
		{"drop invalidates the collection stream", collA, false, cmd("test", &uuidA, bson.D{{Key: "drop", Value: "a"}}, nil, 20), []bson.D{
			{{Key: "_id", Value: id(20, 0, &uuidA, dropEID, false)}, {Key: "operationType", Value: "drop"}, {Key: "clusterTime", Value: ts(20)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}},
			inv(20, &uuidA, dropEID)}},
		{"drop expanded", collA, true, cmd("test", &uuidA, bson.D{{Key: "drop", Value: "a"}}, nil, 20), []bson.D{
			{{Key: "_id", Value: id(20, 0, &uuidA, dropEID, false)}, {Key: "operationType", Value: "drop"}, {Key: "clusterTime", Value: ts(20)},
				{Key: "collectionUUID", Value: bin(uuidA)}, {Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}},
			inv(20, &uuidA, dropEID)}},
		{"drop on a db stream does not invalidate", dbTest, false, cmd("test", &uuidA, bson.D{{Key: "drop", Value: "a"}}, nil, 20), []bson.D{
			{{Key: "_id", Value: id(20, 0, &uuidA, dropEID, false)}, {Key: "operationType", Value: "drop"}, {Key: "clusterTime", Value: ts(20)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}}}},
		{"drop of another collection", collA, false, cmd("test", &uuidB, bson.D{{Key: "drop", Value: "b"}}, nil, 20), nil},
		{"rename: to first", collA, false, cmd("test", &uuidA, renameO, nil, 21), []bson.D{
			{{Key: "to", Value: toB}, {Key: "_id", Value: id(21, 0, &uuidA, renEID, false)}, {Key: "operationType", Value: "rename"},
				{Key: "clusterTime", Value: ts(21)}, {Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}},
			inv(21, &uuidA, renEID)}},
		{"rename expanded", collA, true, cmd("test", &uuidA, renameO, nil, 21), []bson.D{
			{{Key: "to", Value: toB}, {Key: "_id", Value: id(21, 0, &uuidA, renEID, false)}, {Key: "operationType", Value: "rename"},
				{Key: "clusterTime", Value: ts(21)}, {Key: "collectionUUID", Value: bin(uuidA)}, {Key: "wallTime", Value: wall},
				{Key: "ns", Value: nsD("test", "a")}, {Key: "operationDescription", Value: bson.D{{Key: "to", Value: toB}}}},
			inv(21, &uuidA, renEID)}},
		{"rename onto the watched collection (dropTarget)", collA, true, cmd("test", &uuidB, renameDropO, nil, 22), []bson.D{
			{{Key: "to", Value: nsD("test", "a")}, {Key: "_id", Value: id(22, 0, &uuidB, bson.D{{Key: "operationType", Value: "rename"}, {Key: "operationDescription", Value: renDropDesc}}, false)},
				{Key: "operationType", Value: "rename"}, {Key: "clusterTime", Value: ts(22)}, {Key: "collectionUUID", Value: bin(uuidB)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "c")}, {Key: "operationDescription", Value: renDropDesc}},
			inv(22, &uuidB, bson.D{{Key: "operationType", Value: "rename"}, {Key: "operationDescription", Value: renDropDesc}})}},
		{"cross-db rename logged on the source db reaches the target's stream", Scope{Kind: ScopeDatabase, DB: "other"}, false,
			cmd("test", &uuidA, bson.D{{Key: "renameCollection", Value: "test.a"}, {Key: "to", Value: "other.z"}, {Key: "stayTemp", Value: false}}, nil, 23),
			[]bson.D{{{Key: "to", Value: nsD("other", "z")},
				{Key: "_id", Value: id(23, 0, &uuidA, bson.D{{Key: "operationType", Value: "rename"}, {Key: "operationDescription", Value: bson.D{{Key: "to", Value: nsD("other", "z")}}}}, false)},
				{Key: "operationType", Value: "rename"}, {Key: "clusterTime", Value: ts(23)}, {Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}}}},
		{"dropDatabase invalidates the db stream", dbTest, false, cmd("test", nil, bson.D{{Key: "dropDatabase", Value: int32(1)}}, nil, 24), []bson.D{
			{{Key: "_id", Value: id(24, 0, nil, ddEID, false)}, {Key: "operationType", Value: "dropDatabase"}, {Key: "clusterTime", Value: ts(24)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: bson.D{{Key: "db", Value: "test"}}}},
			inv(24, nil, ddEID)}},
		{"dropDatabase on a cluster stream", cluster, true, cmd("test", nil, bson.D{{Key: "dropDatabase", Value: int32(1)}}, nil, 24), []bson.D{
			{{Key: "_id", Value: id(24, 0, nil, ddEID, false)}, {Key: "operationType", Value: "dropDatabase"}, {Key: "clusterTime", Value: ts(24)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: bson.D{{Key: "db", Value: "test"}}}}}},
		{"dropDatabase not on a collection stream", collA, false, cmd("test", nil, bson.D{{Key: "dropDatabase", Value: int32(1)}}, nil, 24), nil},
		{"create is expanded only", collA, false, cmd("test", &uuidA, bson.D{{Key: "create", Value: "a"}, {Key: "idIndex", Value: idIndex}}, nil, 25), nil},
		{"create", collA, true, cmd("test", &uuidA, bson.D{{Key: "create", Value: "a"}, {Key: "idIndex", Value: idIndex}}, nil, 25), []bson.D{
			{{Key: "_id", Value: id(25, 0, &uuidA, bson.D{{Key: "operationType", Value: "create"}, {Key: "operationDescription", Value: createDesc}}, false)},
				{Key: "operationType", Value: "create"}, {Key: "clusterTime", Value: ts(25)}, {Key: "collectionUUID", Value: bin(uuidA)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}, {Key: "operationDescription", Value: createDesc}}}},
		{"createIndexes", collA, true, cmd("test", &uuidA, append(bson.D{{Key: "createIndexes", Value: "a"}}, xSpec...), nil, 26), []bson.D{
			{{Key: "_id", Value: id(26, 0, &uuidA, bson.D{{Key: "operationType", Value: "createIndexes"}, {Key: "operationDescription", Value: ixDesc}}, false)},
				{Key: "operationType", Value: "createIndexes"}, {Key: "clusterTime", Value: ts(26)}, {Key: "collectionUUID", Value: bin(uuidA)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}, {Key: "operationDescription", Value: ixDesc}}}},
		{"commitIndexBuild", collA, true, cmd("test", &uuidA, bson.Raw(commitO), nil, 27), []bson.D{
			{{Key: "_id", Value: id(27, 0, &uuidA, bson.D{{Key: "operationType", Value: "createIndexes"}, {Key: "operationDescription", Value: ixDesc}}, false)},
				{Key: "operationType", Value: "createIndexes"}, {Key: "clusterTime", Value: ts(27)}, {Key: "collectionUUID", Value: bin(uuidA)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}, {Key: "operationDescription", Value: ixDesc}}}},
		{"startIndexBuild gives nothing", collA, true, cmd("test", &uuidA, bson.Raw(startO), nil, 27), nil},
		{"dropIndexes (o2: the spec)", collA, true, cmd("test", &uuidA, bson.D{{Key: "dropIndexes", Value: "a"}, {Key: "index", Value: "x_1"}}, xSpec, 28), []bson.D{
			{{Key: "_id", Value: id(28, 0, &uuidA, bson.D{{Key: "operationType", Value: "dropIndexes"}, {Key: "operationDescription", Value: ixDesc}}, false)},
				{Key: "operationType", Value: "dropIndexes"}, {Key: "clusterTime", Value: ts(28)}, {Key: "collectionUUID", Value: bin(uuidA)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}, {Key: "operationDescription", Value: ixDesc}}}},
		{"collMod", collA, true, cmd("test", &uuidA, bson.D{{Key: "collMod", Value: "a"}, {Key: "validationLevel", Value: "moderate"}}, nil, 29), []bson.D{
			{{Key: "_id", Value: id(29, 0, &uuidA, bson.D{{Key: "operationType", Value: "modify"}, {Key: "operationDescription", Value: bson.D{{Key: "validationLevel", Value: "moderate"}}}}, false)},
				{Key: "operationType", Value: "modify"}, {Key: "clusterTime", Value: ts(29)}, {Key: "collectionUUID", Value: bin(uuidA)},
				{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")},
				{Key: "operationDescription", Value: bson.D{{Key: "validationLevel", Value: "moderate"}}}, {Key: "stateBeforeChange", Value: bson.D{}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := Transform(nil, parse(t, tc.entry), opts(tc.scope, tc.expanded))
			if err != nil {
				t.Fatal(err)
			}
			checkDocs(t, evs, tc.want)
			for i, ev := range evs {
				last := i == len(evs)-1
				if ev.Invalidate != (ev.OperationType == OpInvalidate) || (ev.Invalidate && !last) || ev.Token.FromInvalidate != ev.Invalidate {
					t.Errorf("event %d: Invalidate %v, FromInvalidate %v", i, ev.Invalidate, ev.Token.FromInvalidate)
				}
			}
		})
	}
}

// TestShardingNoops: the no-ops MongoDB's sharding DDL logs become expanded events.
func TestShardingNoops(t *testing.T) {
	noop := func(kind string, o2 bson.D) bson.D {
		return crud("n", "test.a", uuidA, bson.D{{Key: "msg", Value: bson.D{{Key: kind, Value: "test.a"}}}}, append(bson.D{{Key: kind, Value: "test.a"}}, o2...), 30)
	}
	desc := bson.D{{Key: "shardKey", Value: bson.D{{Key: "x", Value: int32(1)}}}, {Key: "unique", Value: false}}
	for _, kind := range []string{OpShardCollection, OpRefineCollectionShardKey, OpReshardCollection} {
		evs, err := Transform(nil, parse(t, noop(kind, desc)), opts(dbTest, true))
		if err != nil {
			t.Fatal(err)
		}
		checkDocs(t, evs, []bson.D{{
			{Key: "_id", Value: id(30, 0, &uuidA, bson.D{{Key: "operationType", Value: kind}, {Key: "operationDescription", Value: desc}}, false)},
			{Key: "operationType", Value: kind}, {Key: "clusterTime", Value: ts(30)}, {Key: "collectionUUID", Value: bin(uuidA)},
			{Key: "wallTime", Value: wall}, {Key: "ns", Value: nsD("test", "a")}, {Key: "operationDescription", Value: desc}}})
		if evs, _ := Transform(nil, parse(t, noop(kind, desc)), opts(dbTest, false)); len(evs) != 0 {
			t.Errorf("%s without expanded events: %v", kind, evs)
		}
	}
	// Other no-ops (the writer's {msg} no-ops on ns "", a session migration's) give nothing.
	plain := bson.D{{Key: "op", Value: "n"}, {Key: "ns", Value: ""}, {Key: "o", Value: bson.D{{Key: "msg", Value: "new primary"}}},
		{Key: "ts", Value: ts(31)}, {Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)}, {Key: "wall", Value: wall}}
	if evs, err := Transform(nil, parse(t, plain), opts(cluster, true)); err != nil || len(evs) != 0 {
		t.Errorf("plain no-op: %v %v", evs, err)
	}
}

// TestFromMigrate: a chunk migration's writes are not events; with ShowSystemEvents its
// create and createIndexes are.
func TestFromMigrate(t *testing.T) {
	fm := bson.E{Key: "fromMigrate", Value: true}
	for _, e := range []bson.D{
		crud("i", "test.a", uuidA, bson.D{{Key: "_id", Value: 1}}, nil, 40, fm),
		crud("d", "test.a", uuidA, bson.D{{Key: "_id", Value: 1}}, nil, 40, fm),
	} {
		for _, sys := range []bool{false, true} {
			o := opts(collA, true)
			o.ShowSystemEvents = sys
			if evs, err := Transform(nil, parse(t, e), o); err != nil || len(evs) != 0 {
				t.Errorf("fromMigrate %v: %v %v", e, evs, err)
			}
		}
	}
	create := cmd("test", &uuidA, bson.D{{Key: "create", Value: "a"}}, nil, 41)
	create = append(create[:4], append(bson.D{fm}, create[4:]...)...)
	o := opts(collA, true)
	if evs, _ := Transform(nil, parse(t, create), o); len(evs) != 0 {
		t.Errorf("fromMigrate create without system events: %v", evs)
	}
	o.ShowSystemEvents = true
	if evs, err := Transform(nil, parse(t, create), o); err != nil || len(evs) != 1 || evs[0].OperationType != OpCreate {
		t.Errorf("fromMigrate create with system events: %v %v", evs, err)
	}
}

// TestScopes: which namespaces each stream sees (MongoDB's change stream regexes).
func TestScopes(t *testing.T) {
	for _, tc := range []struct {
		scope  Scope
		system bool
		ns     string
		want   bool
	}{
		{collA, false, "test.a", true},
		{collA, false, "test.ab", false},
		{collA, false, "test.b", false},
		{collA, false, "testx.a", false},
		{collA, false, "other.a", false},
		{dbTest, false, "test.a", true},
		{dbTest, false, "test.a.b", true},
		{dbTest, false, "other.a", false},
		{dbTest, false, "tes.a", false},
		{dbTest, false, "test.system.views", false},
		{dbTest, false, "test.system.js", false},
		{dbTest, true, "test.system.js", true},
		{dbTest, true, "test.system.jsx", false},
		{dbTest, true, "test.system.buckets.m", true},
		{dbTest, true, "test.system.resharding.x", true},
		{dbTest, true, "test.system.profile", false},
		{dbTest, true, "test.system.views", false},
		{dbTest, false, "test.$cmd", false},
		{dbTest, false, "test.a.system.b", true},
		{cluster, false, "test.a", true},
		{cluster, false, "admin.a", false},
		{cluster, false, "config.a", false},
		{cluster, false, "local.a", false},
		{cluster, false, "adminx.a", true},
		{cluster, false, "x.system.users", false},
		{cluster, true, "x.system.buckets.t", true},
		{cluster, true, "admin.system.js", false},
	} {
		o := opts(tc.scope, false)
		o.ShowSystemEvents = tc.system
		evs, err := Transform(nil, parse(t, crud("i", tc.ns, uuidA, bson.D{{Key: "_id", Value: 1}}, nil, 50)), o)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(evs) == 1; got != tc.want {
			t.Errorf("scope %+v system %v: insert on %s seen %v, want %v", tc.scope, tc.system, tc.ns, got, tc.want)
		}
		// A drop of the same collection follows the same rule.
		db, coll := catalog.SplitNS(tc.ns)
		if strings.Contains(coll, "$") {
			continue
		}
		evs, err = Transform(nil, parse(t, cmd(db, &uuidA, bson.D{{Key: "drop", Value: coll}}, nil, 51)), o)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(evs) > 0; got != tc.want {
			t.Errorf("scope %+v system %v: drop of %s seen %v, want %v", tc.scope, tc.system, tc.ns, got, tc.want)
		}
	}
	// dropDatabase of an internal database is not in a cluster stream.
	for _, db := range []string{"admin", "config", "local"} {
		if evs, _ := Transform(nil, parse(t, cmd(db, nil, bson.D{{Key: "dropDatabase", Value: int32(1)}}, nil, 52)), opts(cluster, false)); len(evs) != 0 {
			t.Errorf("dropDatabase %s: %v", db, evs)
		}
	}
}

func TestNoMakeIDMeansNoID(t *testing.T) {
	evs, err := Transform(nil, parse(t, cmd("test", &uuidA, bson.D{{Key: "drop", Value: "a"}}, nil, 20)), &Options{Scope: collA})
	if err != nil || len(evs) != 2 {
		t.Fatal(evs, err)
	}
	for _, ev := range evs {
		if _, err := ev.Doc.LookupErr("_id"); err == nil {
			t.Errorf("event has an _id: %s", bson.Raw(ev.Doc))
		}
	}
	boom := errors.New("boom")
	o := &Options{Scope: collA, MakeID: func(*Token) (bsoncore.Document, error) { return nil, boom }}
	if _, err := Transform(nil, parse(t, cmd("test", &uuidA, bson.D{{Key: "drop", Value: "a"}}, nil, 20)), o); !errors.Is(err, boom) {
		t.Errorf("MakeID error: %v", err)
	}
}

func TestAddImages(t *testing.T) {
	diffO := bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: bson.D{{Key: "u", Value: bson.D{{Key: "a", Value: int32(2)}}}}}}
	evs, err := Transform(nil, parse(t, crud("u", "test.a", uuidA, diffO, bson.D{{Key: "_id", Value: int32(1)}}, 5)), opts(collA, true))
	if err != nil {
		t.Fatal(err)
	}
	post := bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: doc(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(2)}})}
	pre := bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: doc(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}})}
	got, err := AddImages(evs[0].Doc, post, pre)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	els, _ := got.Elements()
	for _, e := range els {
		keys = append(keys, e.Key())
	}
	want := "_id operationType clusterTime collectionUUID wallTime fullDocument ns documentKey operationDescription updateDescription fullDocumentBeforeChange"
	want = strings.Replace(want, " operationDescription", "", 1) // updates have none
	if strings.Join(keys, " ") != want {
		t.Errorf("fields %v, want %s", keys, want)
	}
	// A null post image (not found) and no pre image.
	got, _ = AddImages(evs[0].Doc, bsoncore.Value{Type: bsoncore.TypeNull}, bsoncore.Value{})
	if v := got.Lookup("fullDocument"); v.Type != bsoncore.TypeNull {
		t.Errorf("fullDocument %v", v)
	}
	if _, err := got.LookupErr("fullDocumentBeforeChange"); err == nil {
		t.Error("fullDocumentBeforeChange added")
	}
}
