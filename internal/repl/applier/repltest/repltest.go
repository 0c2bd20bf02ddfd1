// Package repltest starts in-process nodes for replication tests (fetcher, applier, initial
// sync): a primary (a one-member replica set through the command layer) and plain data nodes
// with an oplog that replicate from it, and compares their data through the Go driver.
package repltest

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/commands"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/member"
	"humongo/internal/repl/oplog"
	"humongo/internal/server"
	"humongo/internal/service"
)

// Node is one in-process humongod.
type Node struct {
	DB     *operation.DB
	Srv    *server.Server
	Host   string
	Client *mongo.Client
	// Writer is the member's oplog writer (nil on the primary, whose writer the command layer
	// owns).
	Writer *oplog.Writer
	RC     *coord.Coordinator
}

func start(t testing.TB) *Node {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mongod := commands.NewMongod(db, service.Config{})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role,
		Closers: []server.Closer{db}})
	if err != nil {
		t.Fatal(err)
	}
	return &Node{DB: db, Srv: s, Host: fmt.Sprintf("127.0.0.1:%d", s.Port())}
}

func (n *Node) connect(t testing.TB) {
	t.Helper()
	n.Srv.Start()
	var err error
	// Polling server monitoring: see fetcher.Connect.
	n.Client, err = mongo.Connect(options.Client().ApplyURI("mongodb://" + n.Host + "/?directConnection=true").
		SetServerSelectionTimeout(30 * time.Second).SetServerMonitoringMode(options.ServerMonitoringModePoll).
		SetWriteConcern(writeconcern.W1())) // tests ask for w:"majority" where they mean it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.Client.Disconnect(context.Background())
		if n.RC != nil {
			n.RC.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Srv.Shutdown(ctx)
	})
}

// StartPrimary starts a one-member replica set and waits until it is a writable primary.
func StartPrimary(t testing.TB) *Node {
	t.Helper()
	n := start(t)
	var err error
	n.RC, err = commands.AttachReplication(context.Background(), n.Srv.State(), n.Srv.Registry(), "rs0", n.Host, 0,
		coord.Options{TickInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: 1}}).Err(); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	for !n.RC.IsWritablePrimary() {
		if ctx.Err() != nil {
			t.Fatal("primary never became writable")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// StartMember starts a data node with an (empty) oplog that is not a replica-set member: the
// tests drive its fetcher, applier or initial sync directly.
func StartMember(t testing.TB) *Node {
	t.Helper()
	n := start(t)
	var err error
	n.Writer, err = oplog.Open(context.Background(), oplog.Config{Engine: n.DB.Engine, Catalog: n.DB.Catalog,
		Colls: n.DB.Colls, MaxSizeBytes: 64 << 20, TempDir: n.DB.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	n.connect(t)
	return n
}

// Dump is a node's user data: per namespace, the documents in _id order and the index
// specs by name.
type Dump map[string]CollDump

// CollDump is one collection's contents.
type CollDump struct {
	Docs    []bson.Raw
	Indexes map[string]bson.Raw
}

// DumpNode reads every collection outside local (and config.system.sessions, which each
// node keeps for itself).
func DumpNode(t testing.TB, n *Node) Dump {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := Dump{}
	dbs, err := n.Client.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		t.Fatalf("%s listDatabases: %v", n.Host, err)
	}
	for _, dbName := range dbs {
		if dbName == "local" {
			continue
		}
		db := n.Client.Database(dbName)
		colls, err := db.ListCollectionNames(ctx, bson.D{{Key: "type", Value: "collection"}})
		if err != nil {
			t.Fatalf("%s listCollections %s: %v", n.Host, dbName, err)
		}
		for _, c := range colls {
			ns := dbName + "." + c
			if ns == "config.system.sessions" {
				continue
			}
			var cd CollDump
			cur, err := db.Collection(c).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
			if err != nil {
				t.Fatalf("%s find %s: %v", n.Host, ns, err)
			}
			for cur.Next(ctx) {
				cd.Docs = append(cd.Docs, append(bson.Raw(nil), cur.Current...))
			}
			if err := cur.Err(); err != nil {
				t.Fatalf("%s find %s: %v", n.Host, ns, err)
			}
			_ = cur.Close(ctx)
			cd.Indexes = map[string]bson.Raw{}
			icur, err := db.Collection(c).Indexes().List(ctx)
			if err != nil {
				t.Fatalf("%s listIndexes %s: %v", n.Host, ns, err)
			}
			for icur.Next(ctx) {
				name, _ := icur.Current.Lookup("name").StringValueOK()
				cd.Indexes[name] = append(bson.Raw(nil), icur.Current...)
			}
			_ = icur.Close(ctx)
			out[ns] = cd
		}
	}
	return out
}

// Compare fails t unless a and b hold the same collections, documents and indexes.
func Compare(t testing.TB, a, b *Node) {
	t.Helper()
	da, db := DumpNode(t, a), DumpNode(t, b)
	names := func(d Dump) []string {
		var s []string
		for k := range d {
			s = append(s, k)
		}
		sort.Strings(s)
		return s
	}
	if na, nb := names(da), names(db); !reflect.DeepEqual(na, nb) {
		t.Fatalf("collections differ:\n%s: %v\n%s: %v", a.Host, na, b.Host, nb)
	}
	for ns, ca := range da {
		cb := db[ns]
		if len(ca.Docs) != len(cb.Docs) {
			t.Errorf("%s: %d documents on %s, %d on %s", ns, len(ca.Docs), a.Host, len(cb.Docs), b.Host)
			continue
		}
		for i := range ca.Docs {
			if !bytesEqual(ca.Docs[i], cb.Docs[i]) {
				t.Errorf("%s: document %d differs:\n%v\n%v", ns, i, ca.Docs[i], cb.Docs[i])
				break
			}
		}
		if len(ca.Indexes) != len(cb.Indexes) {
			t.Errorf("%s: indexes differ:\n%v\n%v", ns, ca.Indexes, cb.Indexes)
			continue
		}
		for name, ia := range ca.Indexes {
			if ib, ok := cb.Indexes[name]; !ok || !bytesEqual(ia, ib) {
				t.Errorf("%s: index %s differs:\n%v\n%v", ns, name, ia, cb.Indexes[name])
			}
		}
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// TotalDocs counts the documents of a dump.
func (d Dump) TotalDocs() int {
	n := 0
	for _, c := range d {
		n += len(c.Docs)
	}
	return n
}

// Workload runs rounds of writes against the primary: inserts (single and vectored),
// updates ($set, $inc, $unset, $push, replacement), deletes, index creation and drops,
// collection creation and drops, over a few collections and two databases.
func Workload(ctx context.Context, cl *mongo.Client, round, ops int) error {
	dbs := []*mongo.Database{cl.Database("app"), cl.Database("other")}
	for i := range ops {
		k := round*ops + i
		db := dbs[k%2]
		c := db.Collection(fmt.Sprintf("c%d", k%3))
		var err error
		switch k % 10 {
		case 0, 1, 2:
			_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: k}, {Key: "x", Value: k}, {Key: "s", Value: fmt.Sprint("v", k)}})
		case 3:
			_, err = c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: fmt.Sprint("m", k, "a")}, {Key: "x", Value: k}},
				bson.D{{Key: "_id", Value: fmt.Sprint("m", k, "b")}, {Key: "x", Value: -k}, {Key: "arr", Value: bson.A{1, 2}}}})
		case 4:
			_, err = c.UpdateMany(ctx, bson.D{{Key: "x", Value: bson.D{{Key: "$lt", Value: k / 2}}}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "touched", Value: k}}}})
		case 5:
			_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: k - 5}},
				bson.D{{Key: "$unset", Value: bson.D{{Key: "s", Value: ""}}}, {Key: "$push", Value: bson.D{{Key: "arr", Value: k}}}})
		case 6:
			_, err = c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: k - 6}}, bson.D{{Key: "replaced", Value: true}, {Key: "x", Value: k}})
		case 7:
			_, err = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: k - 7}})
		case 8:
			if round%2 == 0 {
				_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}, {Key: "s", Value: -1}}})
			} else {
				_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "touched", Value: 1}},
					Options: options.Index().SetSparse(true).SetName("touched_sparse")})
			}
		case 9:
			tmp := db.Collection(fmt.Sprintf("tmp%d", k))
			if _, err = tmp.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err == nil {
				if k%20 == 9 {
					err = tmp.Drop(ctx)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("workload op %d: %w", k, err)
		}
	}
	return nil
}

// TopOfOplog returns the newest entry's timestamp in n's oplog, read through the driver.
func TopOfOplog(t testing.TB, n *Node) bson.Timestamp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var e bson.Raw
	err := n.Client.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{},
		options.FindOne().SetSort(bson.D{{Key: "$natural", Value: -1}})).Decode(&e)
	if err != nil {
		t.Fatalf("%s: top of oplog: %v", n.Host, err)
	}
	s, i := e.Lookup("ts").Timestamp()
	return bson.Timestamp{T: s, I: i}
}

// StartReplSetMember starts a replica-set member of setName with data replication (initial
// sync, fetcher, applier) wired to its coordinator by repl/member.Attach, without
// humongod's rollback hooks. Its fetcher long-polls for 100 ms.
func StartReplSetMember(t testing.TB, setName string) *Node {
	t.Helper()
	return StartReplSetMemberWith(t, setName, MemberOptions{AwaitTime: 100 * time.Millisecond})
}

// MemberOptions tune StartReplSetMemberWith.
type MemberOptions struct {
	// AwaitTime is the fetcher's getMore maxTimeMS (0: the config's heartbeat interval, as
	// in humongod).
	AwaitTime time.Duration
}

// StartReplSetMemberWith is StartReplSetMember with options.
func StartReplSetMemberWith(t testing.TB, setName string, o MemberOptions) *Node {
	t.Helper()
	n := start(t)
	st := n.Srv.State()
	ctx := context.Background()
	rc, w, err := member.Attach(ctx, member.Config{
		DB: n.DB,
		Coord: coord.Options{SetName: setName, Self: n.Host, TickInterval: 20 * time.Millisecond,
			KillWrites: func(cause error) { st.Clients.KillWrites(n.Srv.Registry(), cause) }},
		OplogSizeBytes: 64 << 20,
		Data: coord.DataReplication{AwaitTime: o.AwaitTime,
			Fatal: func(err error) { t.Errorf("%s: fatal apply error: %v", n.Host, err) }},
		Publish: func(rc *coord.Coordinator) { st.Repl = rc },
	})
	if err != nil {
		t.Fatal(err)
	}
	n.RC, n.Writer = rc, w
	n.connect(t)
	return n
}

// ReplSetOptions configure StartReplSet.
type ReplSetOptions struct {
	// Members is the number of members (default 3). Member 0 is the only electable one
	// (the others have priority 0), so it becomes primary and stays primary.
	Members int
	Member  MemberOptions
	// ElectionTimeout and HeartbeatInterval are the config's settings (defaults 2 s, 500 ms).
	ElectionTimeout, HeartbeatInterval time.Duration
}

// StartReplSet starts a replica set of empty members, initiates it and waits until member 0
// is a writable primary and every other member is SECONDARY. It returns the members, the
// primary first.
func StartReplSet(t testing.TB, o ReplSetOptions) []*Node {
	t.Helper()
	if o.Members <= 0 {
		o.Members = 3
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = 2 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 500 * time.Millisecond
	}
	ns := make([]*Node, o.Members)
	members := bson.A{}
	for i := range ns {
		ns[i] = StartReplSetMemberWith(t, "rs0", o.Member)
		m := bson.D{{Key: "_id", Value: i}, {Key: "host", Value: ns[i].Host}}
		if i > 0 {
			m = append(m, bson.E{Key: "priority", Value: 0})
		}
		members = append(members, m)
	}
	cfg := bson.D{{Key: "_id", Value: "rs0"}, {Key: "members", Value: members},
		{Key: "settings", Value: bson.D{{Key: "electionTimeoutMillis", Value: o.ElectionTimeout.Milliseconds()},
			{Key: "heartbeatIntervalMillis", Value: o.HeartbeatInterval.Milliseconds()}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := ns[0].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err(); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	for {
		ready := ns[0].RC.IsWritablePrimary()
		for _, n := range ns[1:] {
			ready = ready && n.RC.Hello().Secondary
		}
		if ready {
			return ns
		}
		if ctx.Err() != nil {
			t.Fatal("the replica set did not get a writable primary and secondaries in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
