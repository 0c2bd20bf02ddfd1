package cluster

import (
	"github.com/xdg-go/scram"

	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/vclock"
	"humongo/internal/wire"
)

// rawCommand sends cmd to addr as one OP_MSG on a fresh connection and returns the reply's
// body, for gossip fields a driver would rewrite ($clusterTime) or never send ($configTime).
// When the harness runs with its keyfile the connection first authenticates as the internal
// user (SCRAM-SHA-256 by hand), as a member's would; its handshake does not claim to be a
// member's, so only a request with $configTime is one.
func rawCommand(t *testing.T, addr string, cmd bson.D) bsoncore.Document {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	if cred, ok := InternalCredential(); ok {
		rawAuthenticate(t, c, br, cred.Password)
	}
	return rawRoundTrip(t, c, br, cmd)
}

// rawRoundTrip writes cmd as an OP_MSG on c and reads the reply's body from br.
func rawRoundTrip(t *testing.T, c net.Conn, br *bufio.Reader, cmd bson.D) bsoncore.Document {
	t.Helper()
	body, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(wire.AppendMsg(nil, 1, 0, 0, body)); err != nil {
		t.Fatal(err)
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, binary.LittleEndian.Uint32(lenBuf[:])-4)
	if _, err := io.ReadFull(br, msg); err != nil {
		t.Fatal(err)
	}
	// header rest (12) + flagBits (4) + section kind (1), then the body document.
	return bsoncore.Document(msg[12+4+1:])
}

// rawAuthenticate runs a SCRAM-SHA-256 conversation as __system@local with key on c.
func rawAuthenticate(t *testing.T, c net.Conn, br *bufio.Reader, key string) {
	t.Helper()
	sc, err := scram.SHA256.NewClient("__system", key, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := sc.NewConversation()
	msg, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	r := rawRoundTrip(t, c, br, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
		{Key: "payload", Value: bson.Binary{Data: []byte(msg)}}, {Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}},
		{Key: "$db", Value: "local"}})
	for !r.Lookup("done").Boolean() {
		_, payload, ok := r.Lookup("payload").BinaryOK()
		if !ok {
			t.Fatalf("SASL reply: %v", r)
		}
		if msg, err = conv.Step(string(payload)); err != nil {
			t.Fatal(err)
		}
		r = rawRoundTrip(t, c, br, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: r.Lookup("conversationId").Int32()},
			{Key: "payload", Value: bson.Binary{Data: []byte(msg)}}, {Key: "$db", Value: "local"}})
	}
}

// TestVectorClockGossip: a config server and a router gossip the vector clock as MongoDB's
// do. Drivers get $clusterTime and operationTime, never $configTime or $topologyTime;
// members (requests carrying $configTime) get them, with ClusterTime >= ConfigTime >=
// TopologyTime and ConfigTime at the config server's commit point; a $clusterTime too far
// ahead of the wall clock fails with ClusterTimeFailsRateLimiter and moves nothing; the
// router never ticks: its clock is what its config server and clients gave it.
func TestVectorClockGossip(t *testing.T) {
	bin := MustBuild(t, "humongod", "humongos")
	dir := t.TempDir()
	cfg := StartProcess(t, ProcessOptions{Name: "cfg0", Binary: bin + "/humongod", Dir: dir,
		Args: []string{"--configsvr", "--replSet", "cfg"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := Connect(t, cfg.URI())
	initiate := bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: "cfg"}, {Key: "configsvr", Value: true},
		{Key: "members", Value: bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: cfg.Addr()}}}}}}}
	if err := cl.Database("admin").RunCommand(ctx, initiate).Err(); err != nil {
		t.Fatal(err)
	}
	// A majority write once the node is primary: the commit point moves past it.
	var err error
	for {
		_, err = cl.Database("config").Collection("gossip").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}

	ts := func(d bsoncore.Document, path ...string) bson.Timestamp {
		t.Helper()
		v, err := d.LookupErr(path...)
		if err != nil {
			return bson.Timestamp{}
		}
		s, i := v.Timestamp()
		return bson.Timestamp{T: s, I: i}
	}
	less := func(a, b bson.Timestamp) bool { return a.Compare(b) < 0 }

	// A driver's request: no member gossip back.
	r := rawCommand(t, cfg.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if _, err := r.LookupErr("$configTime"); err == nil {
		t.Fatalf("a driver got $configTime: %v", r)
	}
	if ts(r, "$clusterTime", "clusterTime").IsZero() {
		t.Fatalf("no $clusterTime: %v", r)
	}

	// A member's request.
	r = rawCommand(t, cfg.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "$configTime", Value: bson.Timestamp{T: 1, I: 0}}})
	ct, cfgT := ts(r, "$clusterTime", "clusterTime"), ts(r, "$configTime")
	if cfgT.IsZero() || less(ct, cfgT) {
		t.Fatalf("member gossip: clusterTime %v, configTime %v: %v", ct, cfgT, r)
	}
	if topo := ts(r, "$topologyTime"); less(cfgT, topo) {
		t.Fatalf("topologyTime %v > configTime %v", topo, cfgT)
	}
	var st struct {
		Optimes struct {
			LastCommittedOpTime struct{ TS bson.Timestamp } `bson:"lastCommittedOpTime"`
		}
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	// The status is read after the ping: its commit point is at least the ConfigTime the
	// ping saw.
	if less(st.Optimes.LastCommittedOpTime.TS, cfgT) {
		t.Fatalf("configTime %v ahead of the commit point %v", cfgT, st.Optimes.LastCommittedOpTime.TS)
	}

	// The rate limiter: more than a year ahead.
	far := bson.Timestamp{T: uint32(time.Now().Unix()) + vclock.DefaultMaxDriftSecs + 3600, I: 1}
	r = rawCommand(t, cfg.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: far},
			{Key: "signature", Value: bson.D{{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}}}}})
	if code, _ := r.Lookup("code").AsInt32OK(); code != 205 || r.Lookup("codeName").StringValue() != "ClusterTimeFailsRateLimiter" {
		t.Fatalf("far $clusterTime: %v", r)
	}
	r = rawCommand(t, cfg.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if now := ts(r, "$clusterTime", "clusterTime"); !less(now, far) {
		t.Fatalf("a refused $clusterTime moved the clock to %v", now)
	}

	// The router: its clock comes from the config server once it has talked to it.
	rt := StartProcess(t, ProcessOptions{Name: "router0", Binary: bin + "/humongos", Dir: dir, NoDBPath: true,
		Args: []string{"--configdb", "cfg/" + cfg.Addr()}})
	before := ts(rawCommand(t, cfg.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}), "$clusterTime", "clusterTime")
	r = rawCommand(t, rt.Addr(), bson.D{{Key: "listShards", Value: 1}, {Key: "$db", Value: "admin"}})
	if ok, _ := r.Lookup("ok").AsFloat64OK(); ok != 1 {
		t.Fatalf("listShards: %v", r)
	}
	rct, rop := ts(r, "$clusterTime", "clusterTime"), ts(r, "operationTime")
	if less(rct, before) || rop.IsZero() || less(rct, rop) {
		t.Fatalf("router: clusterTime %v (config server was at %v), operationTime %v: %v", rct, before, rop, r)
	}
	if _, err := r.LookupErr("$configTime"); err == nil {
		t.Fatalf("the router gave a driver $configTime: %v", r)
	}
	// The router learned a ConfigTime from the config server (its requests mark it as a
	// member even before it has one), and gives it to members.
	r = rawCommand(t, rt.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "$configTime", Value: bson.Timestamp{}}})
	if got := ts(r, "$configTime"); got.IsZero() {
		t.Fatalf("the router has no ConfigTime after talking to the config server: %v", r)
	}
	// The router reports itself in config.mongos (sh.status's "active mongoses").
	var mongos bson.M
	for {
		err = cl.Database("config").Collection("mongos").FindOne(ctx, bson.D{}).Decode(&mongos)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || mongos["mongoVersion"] == nil || mongos["ping"] == nil {
		t.Fatalf("config.mongos: %v, %v", mongos, err)
	}
	// A router never ticks: with no new writes anywhere, its time stays.
	r2 := rawCommand(t, rt.Addr(), bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if got := ts(r2, "$clusterTime", "clusterTime"); less(got, rct) {
		t.Fatalf("router clock went back: %v after %v", got, rct)
	}
}
