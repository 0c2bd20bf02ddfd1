package commands_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/commands"
	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/server"
	"humongo/internal/service"
	"humongo/internal/storage"
)

// outReplNode is a node whose writes go through a real oplog writer (the observer a replica
// set primary installs), served over the wire for the Go driver.
type outReplNode struct {
	db *operation.DB
	w  *oplog.Writer
}

func openOutReplNode(t *testing.T, withOplog bool) *outReplNode {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	n := &outReplNode{db: db}
	if withOplog {
		n.w, err = oplog.Open(context.Background(), oplog.Config{
			Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
			MaxSizeBytes: 16 << 20, Term: func() (int64, bool) { return 1, true }, TempDir: db.TempDir,
		})
		if err != nil {
			t.Fatal(err)
		}
		db.SetObserver(n.w)
	}
	return n
}

func (n *outReplNode) client(t *testing.T) *mongo.Client {
	t.Helper()
	mongod := commands.NewMongod(n.db, service.Config{})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	cl, err := mongo.Connect(options.Client().
		ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(30 * time.Second).SetRetryWrites(false))
	if err != nil {
		_ = s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Disconnect(context.Background())
		_ = s.Close()
	})
	return cl
}

func (n *outReplNode) entries(t *testing.T) []bson.Raw {
	t.Helper()
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(n.w.Ident(), storage.CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []bson.Raw
	for ok := c.First(); ok; ok = c.Next() {
		out = append(out, bson.Raw(slices.Clone(c.Value())))
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// state lists the user collections (name, UUID) and their documents in _id order.
func (n *outReplNode) state(t *testing.T) string {
	t.Helper()
	var lines []string
	for _, m := range n.db.Catalog.Latest().All() {
		if strings.HasPrefix(m.NS, "local.") || m.NS == oplog.PreImagesNS { // every node's own
			continue
		}
		lines = append(lines, fmt.Sprintf("%s %s", m.NS, m.UUID))
		ru := n.db.Engine.NewRecoveryUnit()
		rs, err := storage.OpenRecordStore(n.db.Engine, m.Ident)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := rs.NewCursor(ru, false)
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, d, ok := cur.Next()
			if !ok {
				break
			}
			lines = append(lines, "  "+m.NS+" "+bson.Raw(d).String())
		}
		cur.Close()
		ru.Close()
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestAggOutReplicated: $out's temporary collection create, its inserts and the rename over
// the target (dropping the old target) are oplogged, and a node applying that oplog ends
// with the same collections (same UUIDs) and documents.
func TestAggOutReplicated(t *testing.T) {
	ctx := context.Background()
	a := openOutReplNode(t, true)
	cl := a.client(t)
	db := cl.Database("test")
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i % 3}})
	}
	if _, err := db.Collection("src").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("dst").InsertOne(ctx, bson.D{{Key: "_id", Value: "old"}}); err != nil {
		t.Fatal(err)
	}
	pipe := bson.A{
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		bson.D{{Key: "$out", Value: "dst"}},
	}
	cur, err := db.Collection("src").Aggregate(ctx, pipe)
	if err != nil {
		t.Fatal(err)
	}
	_ = cur.Close(ctx)
	// A failing $out (a non-numeric $sum is fine; a duplicate _id is not) drops its
	// temporary collection, and that drop is replicated too.
	bad := bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: "same"}}}}, bson.D{{Key: "$out", Value: "dst2"}}}
	if _, err := db.Collection("src").Aggregate(ctx, bad); err == nil {
		t.Fatal("$out of duplicate _ids succeeded")
	}

	es := a.entries(t)
	var tmp string
	var cmds []string
	inserts := map[string]int{}
	for _, e := range es {
		switch e.Lookup("op").StringValue() {
		case "c":
			o := bson.Raw(e.Lookup("o").Document())
			cmds = append(cmds, o.String())
			if c, ok := o.Lookup("create").StringValueOK(); ok && strings.HasPrefix(c, "tmp.agg_out.") && tmp == "" {
				tmp = c
			}
		case "i":
			inserts[e.Lookup("ns").StringValue()]++
		}
	}
	if tmp == "" {
		t.Fatalf("no create entry for $out's temporary collection; command entries:\n%s", strings.Join(cmds, "\n"))
	}
	if inserts["test."+tmp] != 3 {
		t.Errorf("inserts into %s: %d, want 3 (%v)", tmp, inserts["test."+tmp], inserts)
	}
	wantRename := fmt.Sprintf(`{"renameCollection": "test.%s","to": "test.dst","stayTemp": false,"dropTarget": {"$binary":`, tmp)
	renames, drops := 0, 0
	for _, c := range cmds {
		if strings.HasPrefix(c, `{"renameCollection"`) {
			renames++
			if !strings.HasPrefix(c, wantRename) {
				t.Errorf("rename entry %s\nwant prefix %s", c, wantRename)
			}
		}
		if strings.HasPrefix(c, `{"drop": "tmp.agg_out.`) {
			drops++
		}
	}
	if renames != 1 || drops != 1 {
		t.Errorf("renames %d drops %d, want 1 and 1; command entries:\n%s", renames, drops, strings.Join(cmds, "\n"))
	}

	// A secondary applying the oplog ends with the same data.
	b := openOutReplNode(t, false)
	ap := oplog.NewApplier(oplog.Config{Engine: b.db.Engine, Catalog: b.db.Catalog, Colls: b.db.Colls, TempDir: b.db.TempDir})
	ru := b.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	for i, e := range es {
		if err := ap.Apply(ctx, ru, bsoncore.Document(e), oplog.ModeSecondary); err != nil {
			t.Fatalf("apply entry %d (%s): %v", i, e, err)
		}
	}
	got, want := b.state(t), a.state(t)
	if got != want {
		t.Fatalf("secondary state:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(want, `test.dst {"_id": {"$numberInt":"0"},"n": {"$numberInt":"7"}}`) || strings.Contains(want, "tmp.agg_out") || strings.Contains(want, `"old"`) {
		t.Fatalf("unexpected primary state:\n%s", want)
	}
}
