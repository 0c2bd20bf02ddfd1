package oplog_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/commands"
	"humongo/internal/repl/oplog"
	"humongo/internal/server"
	"humongo/internal/service"
)

// serve starts an in-process server on n's storage and returns a connected client.
func (n *node) serve() *mongo.Client {
	n.t.Helper()
	params := service.NewParams(commands.DefaultParamSpecs())
	mongod := commands.NewMongod(n.db, service.Config{Params: params})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role})
	if err != nil {
		n.t.Fatal(err)
	}
	s.Start()
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(30 * time.Second).SetRetryWrites(false)
	cl, err := mongo.Connect(o)
	if err != nil {
		_ = s.Close()
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() {
		_ = cl.Disconnect(context.Background())
		_ = s.Close()
	})
	return cl
}

func run(t *testing.T, cl *mongo.Client, db string, cmd bson.D) {
	t.Helper()
	if err := cl.Database(db).RunCommand(context.Background(), cmd).Err(); err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
}

// state describes a node's user data: per collection its UUID, options, indexes and
// documents.
func (n *node) state() string {
	var b strings.Builder
	for _, m := range n.db.Catalog.Latest().All() {
		if strings.HasPrefix(m.NS, "local.") {
			continue
		}
		fmt.Fprintf(&b, "%s %s %s\n", m.NS, m.UUID, bson.Raw(m.Options))
		for _, ix := range m.Indexes {
			fmt.Fprintf(&b, "  index %s ready=%v %s\n", ix.Name, ix.Ready, bson.Raw(ix.Spec))
		}
		for _, d := range n.docsAt(m.NS, 0) {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	lines := strings.Split(b.String(), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestDDLEntriesAndIdempotentApply drives a replica-set node through commands, checks the
// command entries, then applies its whole oplog to a second node twice per entry and
// compares the two nodes' data.
// buildUUIDRE matches an index build UUID in an entry's extended JSON.
var buildUUIDRE = regexp.MustCompile(`"indexBuildUUID": \{"\$binary":\{"base64":"[^"]*","subType":"04"\}\}`)

func TestDDLEntriesAndIdempotentApply(t *testing.T) {
	a := openNode(t, true)
	cl := a.serve()
	run(t, cl, "test", bson.D{{Key: "create", Value: "a"}})
	run(t, cl, "test", bson.D{{Key: "createIndexes", Value: "a"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}})
	// Indexes added to an empty collection (logged in the DDL unit); y_1 is dropped later.
	run(t, cl, "test", bson.D{{Key: "createIndexes", Value: "a"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "y", Value: 1}}}, {Key: "name", Value: "y_1"}}}}})
	run(t, cl, "test", bson.D{{Key: "createIndexes", Value: "a"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "z", Value: -1}}}, {Key: "name", Value: "z_-1"}}}}})
	run(t, cl, "test", bson.D{{Key: "insert", Value: "a"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}, {Key: "arr", Value: bson.A{1, 2, 3}}, {Key: "sub", Value: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: "long enough text here"}}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 3}},
	}}})
	run(t, cl, "test", bson.D{{Key: "update", Value: "a"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{
			{Key: "$inc", Value: bson.D{{Key: "x", Value: 10}, {Key: "sub.p", Value: 5}}},
			{Key: "$push", Value: bson.D{{Key: "arr", Value: 4}}},
			{Key: "$unset", Value: bson.D{{Key: "nothing", Value: ""}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "y", Value: "replaced"}}}},
	}}})
	run(t, cl, "test", bson.D{{Key: "delete", Value: "a"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 3}}}, {Key: "limit", Value: 1}}}}})
	run(t, cl, "test", bson.D{{Key: "dropIndexes", Value: "a"}, {Key: "index", Value: "y_1"}})
	run(t, cl, "test", bson.D{{Key: "collMod", Value: "a"}, {Key: "validationLevel", Value: "moderate"}})
	run(t, cl, "admin", bson.D{{Key: "renameCollection", Value: "test.a"}, {Key: "to", Value: "test.b"}})
	run(t, cl, "test", bson.D{{Key: "insert", Value: "gone"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	run(t, cl, "test", bson.D{{Key: "drop", Value: "gone"}})
	run(t, cl, "other", bson.D{{Key: "insert", Value: "o"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}})
	run(t, cl, "other", bson.D{{Key: "dropDatabase", Value: 1}})

	// An index built on a non-empty collection: a two-phase build, logged as
	// startIndexBuild and commitIndexBuild (their build UUID is masked below).
	run(t, cl, "test", bson.D{{Key: "createIndexes", Value: "b"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "w", Value: 1}}}, {Key: "name", Value: "w_1"}}}}})

	es := a.oplogEntries()
	var cmds []string
	for _, e := range es {
		if e.Lookup("op").StringValue() == "c" {
			cmds = append(cmds, buildUUIDRE.ReplaceAllString(bson.Raw(e.Lookup("o").Document()).String(), `"indexBuildUUID": UUID`))
		}
	}
	wantCmds := []string{
		`{"create": "a","idIndex": {"v": {"$numberInt":"2"},"key": {"_id": {"$numberInt":"1"}},"name": "_id_"}}`,
		`{"createIndexes": "a","v": {"$numberInt":"2"},"key": {"x": {"$numberInt":"1"}},"name": "x_1"}`,
		`{"createIndexes": "a","v": {"$numberInt":"2"},"key": {"y": {"$numberInt":"1"}},"name": "y_1"}`,
		`{"createIndexes": "a","v": {"$numberInt":"2"},"key": {"z": {"$numberInt":"-1"}},"name": "z_-1"}`,
		`{"dropIndexes": "a","index": "y_1"}`,
		`{"collMod": "a","validationLevel": "moderate"}`,
		`{"renameCollection": "test.a","to": "test.b","stayTemp": false}`,
		`{"create": "gone","idIndex": {"v": {"$numberInt":"2"},"key": {"_id": {"$numberInt":"1"}},"name": "_id_"}}`,
		`{"drop": "gone"}`,
		`{"create": "o","idIndex": {"v": {"$numberInt":"2"},"key": {"_id": {"$numberInt":"1"}},"name": "_id_"}}`,
		`{"drop": "o"}`,
		`{"dropDatabase": {"$numberInt":"1"}}`,
		`{"startIndexBuild": "b","indexBuildUUID": UUID,"indexes": [{"v": {"$numberInt":"2"},"key": {"w": {"$numberInt":"1"}},"name": "w_1"}]}`,
		`{"commitIndexBuild": "b","indexBuildUUID": UUID,"indexes": [{"v": {"$numberInt":"2"},"key": {"w": {"$numberInt":"1"}},"name": "w_1"}]}`,
	}
	if !slices.Equal(cmds, wantCmds) {
		t.Errorf("command entries:\n%s\nwant:\n%s", strings.Join(cmds, "\n"), strings.Join(wantCmds, "\n"))
	}
	// The $inc/$push update is a $v:2 diff with the resulting values.
	for _, e := range es {
		if e.Lookup("op").StringValue() == "u" && e.Lookup("o2", "_id").Int32() == 1 {
			got := bson.Raw(e.Lookup("o").Document()).String()
			want := `{"$v": {"$numberInt":"2"},"diff": {"u": {"x": {"$numberInt":"11"}},"sarr": {"a": true,"u3": {"$numberInt":"4"}},"ssub": {"u": {"p": {"$numberInt":"6"}}}}}`
			if got != want {
				t.Errorf("update entry o:\n got %s\nwant %s", got, want)
			}
		}
	}

	// The build's entries are applied too: the applier registers and commits it at the
	// entries' timestamps.
	run(t, cl, "test", bson.D{{Key: "dropIndexes", Value: "b"}, {Key: "index", Value: "w_1"}})
	es = a.oplogEntries()
	b := openNode(t, false)
	ap := oplog.NewApplier(oplog.Config{Engine: b.db.Engine, Catalog: b.db.Catalog, Colls: b.db.Colls, TempDir: b.db.TempDir})
	ru := b.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	for i, e := range es {
		for rep := range 2 {
			if err := ap.Apply(context.Background(), ru, bsoncore.Document(e), oplog.ModeSecondary); err != nil {
				t.Fatalf("apply entry %d (%s) time %d: %v", i, e, rep+1, err)
			}
		}
	}
	if got, want := b.state(), a.state(); got != want {
		t.Fatalf("state after applying twice:\n%s\nwant:\n%s", got, want)
	}

}
