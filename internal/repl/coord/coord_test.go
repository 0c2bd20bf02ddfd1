package coord_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/server"
	"humongo/internal/service"
)

// node is one in-process humongod: storage, server and (for members) a coordinator.
type node struct {
	srv    *server.Server
	rc     *coord.Coordinator
	host   string
	client *mongo.Client
}

func startNode(t *testing.T, setName string) *node {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	params := service.NewParams(commands.DefaultParamSpecs())
	mongod := commands.NewMongod(db, service.Config{Params: params})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role, Closers: []server.Closer{db}})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{srv: s, host: fmt.Sprintf("127.0.0.1:%d", s.Port())}
	if setName != "" {
		n.rc, err = commands.AttachReplication(context.Background(), s.State(), s.Registry(), setName, n.host, 0,
			coord.Options{TickInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Start()
	n.client, err = mongo.Connect(options.Client().ApplyURI("mongodb://" + n.host + "/?directConnection=true").
		SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer func(t0 time.Time) { t.Logf("stopped %s in %v", n.host, time.Since(t0)) }(time.Now())
		_ = n.client.Disconnect(context.Background())
		if n.rc != nil {
			n.rc.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return n
}

func (n *node) admin(t *testing.T, cmd bson.D) (bson.M, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bson.M
	err := n.client.Database("admin").RunCommand(ctx, cmd).Decode(&out)
	return out, err
}

func codeOf(err error) int {
	var ce mongo.CommandError
	if e, ok := err.(mongo.CommandError); ok {
		return int(e.Code)
	}
	_ = ce
	var we mongo.WriteException
	if e, ok := err.(mongo.WriteException); ok {
		we = e
		if len(we.WriteErrors) > 0 {
			return we.WriteErrors[0].Code
		}
	}
	var se mongo.ServerError
	if e, ok := err.(mongo.ServerError); ok {
		se = e
		for _, c := range []int{int(mongoerr.NotWritablePrimary), int(mongoerr.NotPrimaryNoSecondaryOk)} {
			if se.HasErrorCode(c) {
				return c
			}
		}
	}
	return -1
}

// waitFor polls cond (test code only) until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func states(t *testing.T, ns []*node) (primary int, secondaries int) {
	primary = -1
	for i, n := range ns {
		h := n.rc.Hello()
		switch {
		case h.IsWritablePrimary:
			if primary >= 0 {
				t.Fatalf("two writable primaries: %d and %d", primary, i)
			}
			primary = i
		case h.Secondary:
			secondaries++
		}
	}
	return primary, secondaries
}

func TestReplicaSetElectionsAndCommands(t *testing.T) {
	ns := []*node{startNode(t, "rs0"), startNode(t, "rs0"), startNode(t, "rs0")}
	members := bson.A{}
	for i, n := range ns {
		members = append(members, bson.D{{Key: "_id", Value: i}, {Key: "host", Value: n.host}})
	}
	cfg := bson.D{{Key: "_id", Value: "rs0"}, {Key: "members", Value: members},
		{Key: "settings", Value: bson.D{{Key: "electionTimeoutMillis", Value: 1000}, {Key: "heartbeatIntervalMillis", Value: 200}}}}

	// Before initiate: status is NotYetInitialized; hello says no config.
	if _, err := ns[1].admin(t, bson.D{{Key: "replSetGetStatus", Value: 1}}); codeOf(err) != int(mongoerr.NotYetInitialized) {
		t.Fatalf("status before initiate: %v", err)
	}
	start := time.Now()
	if _, err := ns[0].admin(t, bson.D{{Key: "replSetInitiate", Value: cfg}}); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	if _, err := ns[0].admin(t, bson.D{{Key: "replSetInitiate", Value: cfg}}); codeOf(err) != int(mongoerr.AlreadyInitialized) {
		t.Fatalf("second initiate: want 23, got %v", err)
	}
	var primary int
	waitFor(t, 15*time.Second, "one primary and two secondaries", func() bool {
		p, s := states(t, ns)
		primary = p
		return p >= 0 && s == 2
	})
	t.Logf("primary %s elected %v after initiate", ns[primary].host, time.Since(start))

	// replSetGetStatus shape.
	st, err := ns[primary].admin(t, bson.D{{Key: "replSetGetStatus", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"set", "date", "myState", "term", "heartbeatIntervalMillis", "majorityVoteCount",
		"writeMajorityCount", "votingMembersCount", "optimes", "members"} {
		if _, ok := st[f]; !ok {
			t.Errorf("replSetGetStatus lacks %q: %v", f, st)
		}
	}
	if st["set"] != "rs0" || st["myState"] != int32(1) {
		t.Errorf("status set/myState: %v %v", st["set"], st["myState"])
	}
	opt := toM(st["optimes"])
	for _, f := range []string{"lastCommittedOpTime", "readConcernMajorityOpTime", "appliedOpTime", "durableOpTime"} {
		if _, ok := opt[f]; !ok {
			t.Errorf("optimes lacks %q", f)
		}
	}
	mems := st["members"].(bson.A)
	if len(mems) != 3 {
		t.Fatalf("members: %v", mems)
	}
	nPrimary, nSelf := 0, 0
	for _, m := range mems {
		mm := toM(m)
		for _, f := range []string{"_id", "name", "health", "state", "stateStr", "uptime", "optime", "optimeDate",
			"optimeDurable", "syncSourceHost", "syncSourceId", "configVersion", "configTerm"} {
			if _, ok := mm[f]; !ok {
				t.Errorf("member lacks %q: %v", f, mm)
			}
		}
		if mm["stateStr"] == "PRIMARY" {
			nPrimary++
			if _, ok := mm["electionTime"]; !ok {
				t.Errorf("primary member lacks electionTime")
			}
		}
		if mm["self"] == true {
			nSelf++
		} else if _, ok := mm["lastHeartbeat"]; !ok {
			t.Errorf("other member lacks lastHeartbeat: %v", mm)
		}
		if mm["health"] != 1.0 {
			t.Errorf("member %v unhealthy", mm["name"])
		}
	}
	if nPrimary != 1 || nSelf != 1 {
		t.Errorf("status: %d primaries, %d self", nPrimary, nSelf)
	}

	// hello on the primary and a secondary.
	sec := (primary + 1) % 3
	h, err := ns[primary].admin(t, bson.D{{Key: "hello", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if h["setName"] != "rs0" || h["isWritablePrimary"] != true || h["primary"] != ns[primary].host || h["me"] != ns[primary].host {
		t.Errorf("primary hello: %v", h)
	}
	if _, ok := h["electionId"].(bson.ObjectID); !ok {
		t.Errorf("primary hello lacks electionId: %v", h)
	}
	if hs, _ := h["hosts"].(bson.A); len(hs) != 3 {
		t.Errorf("hello hosts: %v", h["hosts"])
	}
	// A secondary learns who the primary is from heartbeats (every 200 ms here): wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if h, err = ns[sec].admin(t, bson.D{{Key: "hello", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		if h["primary"] == ns[primary].host || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h["secondary"] != true || h["isWritablePrimary"] != false || h["primary"] != ns[primary].host {
		t.Errorf("secondary hello: %v", h)
	}

	// Writes on a secondary: NotWritablePrimary; reads without secondaryOk: 13435.
	ctx := context.Background()
	_, err = ns[sec].client.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	if codeOf(err) != int(mongoerr.NotWritablePrimary) {
		t.Errorf("insert on secondary: want 10107, got %v", err)
	}
	// The driver adds $readPreference: primaryPreferred on a direct connection, so send a
	// bare OP_MSG.
	if reply := rawCommand(t, ns[sec].host, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "test"}}); reply.Lookup("code").AsInt64() != int64(mongoerr.NotPrimaryNoSecondaryOk) {
		t.Errorf("find on secondary without secondaryOk: want 13435, got %v", reply)
	}
	err = ns[sec].client.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}},
		options.RunCmd().SetReadPreference(readpref.SecondaryPreferred())).Err()
	if err != nil {
		t.Errorf("find on secondary with secondaryPreferred: %v", err)
	}
	if _, err := ns[primary].client.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Errorf("insert on primary: %v", err)
	}

	// Secondaries replicate (AttachReplication starts the fetcher and applier), so a majority
	// wait for the primary's last write is satisfied; the wtimeout reply shape is pinned by
	// TestWriteConcernTimeoutShape in internal/commands.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := ns[primary].rc.WaitForWriteConcern(ctx, ns[primary].rc.LastApplied(), coord.WriteConcern{Majority: true, WTimeout: 15 * time.Second})
		cancel()
		if err != nil {
			t.Errorf("w:majority with replication running: %v", err)
		}
	}

	// Heartbeat from another set.
	if _, err := ns[sec].admin(t, bson.D{{Key: "replSetHeartbeat", Value: "other"}, {Key: "configVersion", Value: 1},
		{Key: "fromId", Value: 0}, {Key: "term", Value: 0}}); codeOf(err) != int(mongoerr.InconsistentReplicaSetNames) {
		t.Errorf("heartbeat from other set: want 108, got %v", err)
	}
	if _, err := ns[primary].admin(t, bson.D{{Key: "replSetGetConfig", Value: 1}}); err != nil {
		t.Errorf("replSetGetConfig: %v", err)
	}

	// Step down: another member takes over.
	oldTerm := ns[primary].rc.Hello()
	start = time.Now()
	if _, err := ns[primary].admin(t, bson.D{{Key: "replSetStepDown", Value: 30}, {Key: "force", Value: true}}); err != nil {
		t.Fatalf("replSetStepDown: %v", err)
	}
	_ = oldTerm
	waitFor(t, 15*time.Second, "a new primary after step-down", func() bool {
		p, _ := states(t, ns)
		return p >= 0 && p != primary
	})
	t.Logf("new primary after step-down in %v", time.Since(start))
	if ns[primary].rc.IsWritablePrimary() {
		t.Fatal("old primary still writable")
	}
}

func TestStandaloneReplCommands(t *testing.T) {
	n := startNode(t, "")
	for _, name := range []string{"replSetGetStatus", "replSetGetConfig", "replSetInitiate", "replSetStepDown",
		"replSetFreeze", "replSetGetRBID", "replSetHeartbeat", "replSetRequestVotes", "replSetUpdatePosition",
		"replSetStepUp", "replSetMaintenance", "replSetSyncFrom", "replSetReconfig"} {
		_, err := n.admin(t, bson.D{{Key: name, Value: 1}})
		if codeOf(err) != int(mongoerr.NoReplicationEnabled) {
			t.Errorf("%s on a standalone: want 76, got %v", name, err)
		}
	}
}

// toM turns a nested document decoded as bson.D into a map.
func toM(v any) bson.M {
	out := bson.M{}
	switch d := v.(type) {
	case bson.M:
		return d
	case bson.D:
		for _, e := range d {
			out[e.Key] = e.Value
		}
	}
	return out
}

// rawCommand sends cmd as a bare OP_MSG (no driver-added fields) and returns the reply.
func rawCommand(t *testing.T, host string, cmd bson.D) bson.Raw {
	t.Helper()
	body, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	msg := make([]byte, 16, 21+len(body))
	binary.LittleEndian.PutUint32(msg[4:], 1)     // requestID
	binary.LittleEndian.PutUint32(msg[12:], 2013) // OP_MSG
	msg = append(msg, 0, 0, 0, 0, 0)              // flagBits, section kind 0
	msg = append(msg, body...)
	binary.LittleEndian.PutUint32(msg[0:], uint32(len(msg)))
	if _, err := conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(conn, hdr); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, binary.LittleEndian.Uint32(hdr)-16)
	if _, err := io.ReadFull(conn, rest); err != nil {
		t.Fatal(err)
	}
	return bson.Raw(rest[5:])
}

func TestSingleNodeInitiate(t *testing.T) {
	n := startNode(t, "solo")
	start := time.Now()
	// An empty document is no configuration (mongod's givenConfig.isEmpty()): the default.
	if _, err := n.admin(t, bson.D{{Key: "replSetInitiate", Value: bson.D{}}}); err != nil {
		t.Fatalf("default initiate: %v", err)
	}
	if _, err := n.admin(t, bson.D{{Key: "replSetInitiate", Value: 1}}); codeOf(err) != int(mongoerr.AlreadyInitialized) {
		t.Fatalf("second initiate: %v", err)
	}
	waitFor(t, 5*time.Second, "single node primary", n.rc.IsWritablePrimary)
	t.Logf("single node writable after %v", time.Since(start))
	cfg, err := n.admin(t, bson.D{{Key: "replSetGetConfig", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c := toM(cfg["config"])
	if c["_id"] != "solo" || len(c["members"].(bson.A)) != 1 {
		t.Fatalf("default config: %v", c)
	}
	if _, err := n.client.Database("test").Collection("c").InsertOne(context.Background(), bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert on single-node primary: %v", err)
	}
	// The oplog holds the "initiating set" and "new primary" no-ops and the insert.
	var entries []bson.M
	cur, err := n.client.Database("local").Collection("oplog.rs").Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(context.Background(), &entries); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	inserts := 0
	for _, e := range entries {
		if e["op"] == "n" {
			msgs = append(msgs, fmt.Sprint(toM(e["o"])["msg"]))
		}
		if e["op"] == "i" && e["ns"] == "test.c" {
			inserts++
		}
	}
	if len(msgs) < 2 || msgs[0] != "initiating set" || msgs[1] != "new primary" || inserts != 1 {
		t.Fatalf("oplog no-ops %q, %d inserts: %v", msgs, inserts, entries)
	}
	h, _ := n.admin(t, bson.D{{Key: "hello", Value: 1}})
	if h["isWritablePrimary"] != true || h["setName"] != "solo" {
		t.Fatalf("hello: %v", h)
	}
	// Write concern: w:1 returns at once; w:majority on a one-node set is satisfied by the
	// commit point once the write is durable.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.rc.WaitForWriteConcern(ctx, n.rc.LastApplied(), coord.WriteConcern{Majority: true, WTimeout: 3 * time.Second}); err != nil {
		t.Fatalf("w:majority on one node: %v", err)
	}
	// w:2 cannot be satisfied by one member.
	if err := n.rc.WaitForWriteConcern(ctx, n.rc.LastApplied(), coord.WriteConcern{W: 2, WTimeout: 200 * time.Millisecond}); !mongoerr.Is(err, mongoerr.UnsatisfiableWriteConcern) {
		t.Fatalf("w:2 on one node: %v", err)
	}
}
