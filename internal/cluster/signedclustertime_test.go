package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/vclock"
)

// ownKey is the keyfile key of the signed-cluster-time tests when the harness runs
// without authentication.
const ownKey = "c2lnbmVkY2x1c3RlcnRpbWVrZXlmaWxl"

// testKey is the key the tests' processes run with: the harness's (its clients authenticate
// with it), else ownKey.
var testKey = func() string {
	if _, key, err := Keyfile(); AuthOn() && err == nil {
		return key
	}
	return ownKey
}()

// writeKeyfile returns a keyfile holding testKey, owner-only (mongod refuses others).
func writeKeyfile(t *testing.T) string {
	t.Helper()
	if path, _, err := Keyfile(); AuthOn() && err == nil {
		return path
	}
	path := filepath.Join(t.TempDir(), "keyfile")
	if err := os.WriteFile(path, []byte(ownKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// connectUser connects to node (directly) as user@source.
func connectUser(t *testing.T, node *Process, user, pwd, source string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI(node.URI()).SetServerSelectionTimeout(10 * time.Second).
		SetAuth(options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: source, Username: user, Password: pwd}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

// gossiped is a reply's $clusterTime and operationTime.
type gossiped struct {
	ct      optime.Timestamp
	sig     vclock.Signature
	opTime  optime.Timestamp
	present bool
}

func readGossiped(t *testing.T, raw bson.Raw) gossiped {
	t.Helper()
	doc := bsoncore.Document(raw)
	g := vclock.ReadGossip(doc)
	var out gossiped
	out.ct, out.sig = g.Cluster, g.Signature
	_, err := doc.LookupErr("$clusterTime")
	out.present = err == nil
	if s, i, ok := doc.Lookup("operationTime").TimestampOK(); ok {
		out.opTime = optime.MakeTimestamp(s, i)
	}
	return out
}

// runRaw runs cmd on db and returns the whole reply, gossip included.
func runRaw(ctx context.Context, t *testing.T, db *mongo.Database, cmd bson.D) bson.Raw {
	t.Helper()
	raw, err := db.RunCommand(ctx, cmd).Raw()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return raw
}

// clusterTimeDoc is the $clusterTime gossip a client would send back: {clusterTime,
// signature: {hash, keyId}}.
func clusterTimeDoc(ct optime.Timestamp, sig vclock.Signature) bson.Raw {
	d := bsoncore.NewDocumentBuilder().AppendDocument("$clusterTime", bsoncore.NewDocumentBuilder().
		AppendTimestamp("clusterTime", ct.Secs(), ct.Inc()).
		AppendDocument("signature", bsoncore.NewDocumentBuilder().
			AppendBinary("hash", 0, sig.Hash[:]).AppendInt64("keyId", sig.KeyID).Build()).
		Build()).Build()
	return bson.Raw(d)
}

// findWithClusterTime runs a find on test.c as cl in a session whose cluster time is ct with
// sig: the driver sends it (the highest it knows) as the request's $clusterTime.
func findWithClusterTime(ctx context.Context, t *testing.T, cl *mongo.Client, ct optime.Timestamp, sig vclock.Signature) (bson.Raw, error) {
	t.Helper()
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	if err := sess.AdvanceClusterTime(clusterTimeDoc(ct, sig)); err != nil {
		t.Fatal(err)
	}
	return cl.Database("test").RunCommand(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "find", Value: "c"}}).Raw()
}

func wantCode(t *testing.T, what string, err error, code mongoerr.Code) {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(code) {
		t.Fatalf("%s: got %v, want code %d (%s)", what, err, code, code.Name())
	}
}

// waitForKeys waits until the node signs replies to cl (its keyring has a key).
func waitForKeys(ctx context.Context, t *testing.T, cl *mongo.Client) gossiped {
	t.Helper()
	for {
		g := readGossiped(t, runRaw(ctx, t, cl.Database("test"), bson.D{{Key: "find", Value: "c"}}))
		if g.present && !g.sig.IsZero() {
			return g
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no signed $clusterTime: last reply %+v", g)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readKeys reads admin.system.keys (as __system).
func readKeys(ctx context.Context, t *testing.T, sys *mongo.Client) []vclock.Key {
	t.Helper()
	cur, err := sys.Database("admin").Collection("system.keys").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "expiresAt", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var keys []vclock.Key
	for cur.Next(ctx) {
		k, err := vclock.ParseKey(bsoncore.Document(cur.Current))
		if err != nil {
			t.Fatalf("key document %s: %v", cur.Current, err)
		}
		keys = append(keys, k)
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestSignedClusterTime runs a one-member replica set with a keyfile (spec: sharding.md
// "SignedComponentFormat: ClusterTime signing", "Key management"; checklist-sharding.md 5):
//   - the primary makes its signing keys (one valid now, one to follow), and replies to a user
//     without advanceClusterTime carry $clusterTime signed with the current one: MongoDB's
//     HMAC-SHA1 of the time's range, checked here against the key document; __system gets
//     the zero signature;
//   - a forged $clusterTime ahead of the node (valid shape, wrong hash) fails the command with
//     TimeProofMismatch and moves neither $clusterTime nor operationTime; an unknown keyId is
//     KeyNotFound; a signature the node made for an earlier time does not prove a later one;
//   - a user whose custom role grants advanceClusterTime moves the node's clock unsigned.
func TestSignedClusterTime(t *testing.T) {
	t.Parallel()
	d := Start(t, Topology{Kind: ReplicaSet, Members: 1}, Options{Args: []string{"--keyFile", writeKeyfile(t)}})
	ctx := ctxT(t, 90*time.Second)
	node := d.Nodes[0]
	// The localhost exception creates the first user; then the others as root.
	admin := d.DirectClient(node).Database("admin")
	runRaw(ctx, t, admin, bson.D{{Key: "createUser", Value: "root"}, {Key: "pwd", Value: "rootpw"}, {Key: "roles", Value: bson.A{"root"}}})
	root := connectUser(t, node, "root", "rootpw", "admin")
	rootAdmin := root.Database("admin")
	runRaw(ctx, t, rootAdmin, bson.D{{Key: "createUser", Value: "app"}, {Key: "pwd", Value: "apppw"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "test"}}}}})
	runRaw(ctx, t, rootAdmin, bson.D{{Key: "createRole", Value: "advancer"},
		{Key: "privileges", Value: bson.A{bson.D{{Key: "resource", Value: bson.D{{Key: "cluster", Value: true}}},
			{Key: "actions", Value: bson.A{"advanceClusterTime"}}}}},
		{Key: "roles", Value: bson.A{}}})
	runRaw(ctx, t, rootAdmin, bson.D{{Key: "createUser", Value: "adv"}, {Key: "pwd", Value: "advpw"},
		{Key: "roles", Value: bson.A{"advancer", bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "test"}}}}})
	app := connectUser(t, node, "app", "apppw", "admin")
	sys := connectUser(t, node, "__system", testKey, "local")
	if _, err := app.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	// (a) Signed replies, with the current key of admin.system.keys.
	first := waitForKeys(ctx, t, app)
	keys := readKeys(ctx, t, sys)
	if len(keys) < 2 {
		t.Fatalf("keys %v: want the current one and its successor", keys)
	}
	cur := keys[0]
	if first.sig.KeyID != cur.ID || first.sig.Hash != vclock.Proof(cur.Secret, first.ct) {
		t.Fatalf("signature %+v of %s: want key %d's proof", first.sig, first.ct, cur.ID)
	}
	if keys[1].ExpiresAt.Secs()-cur.ExpiresAt.Secs() != vclock.DefaultKeyValiditySecs {
		t.Errorf("keys %v: the successor should expire one rotation interval after the current one", keys)
	}
	if first.opTime.IsNull() {
		t.Error("a signed reply without operationTime")
	}
	if g := readGossiped(t, runRaw(ctx, t, sys.Database("admin"), bson.D{{Key: "ping", Value: 1}})); !g.present || g.sig != (vclock.Signature{}) {
		t.Errorf("__system's $clusterTime: %+v, want the zero signature", g)
	}

	// (b) A forged time a day ahead, signed with nothing the key made.
	ahead := optime.MakeTimestamp(uint32(time.Now().Unix())+86400, 1)
	forged := vclock.Signature{KeyID: cur.ID}
	for i := range forged.Hash {
		forged.Hash[i] = byte(i * 7)
	}
	raw, err := findWithClusterTime(ctx, t, app, ahead, forged)
	wantCode(t, "forged $clusterTime", err, mongoerr.TimeProofMismatch)
	if g := readGossiped(t, raw); g.present && (g.ct >= ahead || g.opTime >= ahead) {
		t.Fatalf("the refused reply gossips the forged time: %+v", g)
	}
	after := readGossiped(t, runRaw(ctx, t, app.Database("test"), bson.D{{Key: "find", Value: "c"}}))
	if after.ct >= ahead || after.opTime >= ahead {
		t.Fatalf("a forged $clusterTime moved the clock: %+v (forged %s)", after, ahead)
	}
	_, err = findWithClusterTime(ctx, t, app, ahead, vclock.Signature{Hash: forged.Hash, KeyID: 12345})
	wantCode(t, "unknown keyId", err, mongoerr.KeyNotFound)

	// (c) The node's own signature of an earlier time, replayed for a later one.
	_, err = findWithClusterTime(ctx, t, app, optime.MakeTimestamp(first.ct.Secs()+3600, 1), first.sig)
	wantCode(t, "replayed signature", err, mongoerr.TimeProofMismatch)
	// At or below the node's time nothing is checked.
	if _, err := findWithClusterTime(ctx, t, app, first.ct, vclock.Signature{}); err != nil {
		t.Fatalf("an old unsigned time: %v", err)
	}
	if g := readGossiped(t, runRaw(ctx, t, app.Database("test"), bson.D{{Key: "find", Value: "c"}})); g.ct >= ahead {
		t.Fatalf("clock moved: %+v", g)
	}

	// (d) advanceClusterTime lets a user move the clock without a signature.
	adv := connectUser(t, node, "adv", "advpw", "admin")
	raw, err = findWithClusterTime(ctx, t, adv, ahead, vclock.Signature{})
	if err != nil {
		t.Fatalf("advanceClusterTime: %v", err)
	}
	if g := readGossiped(t, raw); g.ct < ahead || g.sig != (vclock.Signature{}) {
		t.Fatalf("advanceClusterTime's reply: %+v, want the clock at %s and the zero signature", g, ahead)
	}
	// Everyone now gets the new time, signed (the keys cover it: they last 90 days).
	if g := readGossiped(t, runRaw(ctx, t, app.Database("test"), bson.D{{Key: "find", Value: "c"}})); g.ct < ahead || g.sig.IsZero() {
		t.Fatalf("after the advance: %+v", g)
	}
}

// TestSignedClusterTimeKeyRotation: with a short KeysRotationIntervalSec the primary makes
// each key's successor before the key expires, signing moves to it, and old keys stay.
func TestSignedClusterTimeKeyRotation(t *testing.T) {
	t.Parallel()
	const interval = 3
	d := Start(t, Topology{Kind: ReplicaSet, Members: 1}, Options{Args: []string{"--keyFile", writeKeyfile(t),
		"--setParameter", "KeysRotationIntervalSec=3"}})
	ctx := ctxT(t, 90*time.Second)
	node := d.Nodes[0]
	runRaw(ctx, t, d.DirectClient(node).Database("admin"), bson.D{{Key: "createUser", Value: "app"}, {Key: "pwd", Value: "apppw"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "test"}}}}})
	app := connectUser(t, node, "app", "apppw", "admin")
	sys := connectUser(t, node, "__system", testKey, "local")
	first := waitForKeys(ctx, t, app)
	deadline := time.Now().Add(4 * interval * time.Second)
	for {
		// Keys expire in cluster time, which writes move along with the wall clock.
		if _, err := app.Database("test").Collection("c").InsertOne(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
		g := waitForKeys(ctx, t, app)
		if g.sig.KeyID != first.sig.KeyID {
			// Signing moved to the successor made ahead of need, and the primary makes the
			// successor's successor (no later than the interval); the first key stays.
			for {
				keys := readKeys(ctx, t, sys)
				if len(keys) < 2 || keys[0].ID != first.sig.KeyID || keys[1].ID != g.sig.KeyID {
					t.Fatalf("keys after a rotation: %v (signed with %d)", keys, g.sig.KeyID)
				}
				if g.sig.Hash != vclock.Proof(keys[1].Secret, g.ct) {
					t.Fatalf("signature %+v of %s is not key %d's proof", g.sig, g.ct, keys[1].ID)
				}
				if len(keys) >= 3 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no successor for key %d: keys %v", g.sig.KeyID, keys)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("still signing with key %d after %ds: keys %v", first.sig.KeyID, 4*interval, readKeys(ctx, t, sys))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSignedClusterTimeSecondaries: in a three-member set with a keyfile the keys replicate,
// a secondary signs with the primary's key and validates what the primary signed (a time
// ahead of its own clock, whose key it may have to look up), and refuses a forged one.
func TestSignedClusterTimeSecondaries(t *testing.T) {
	t.Parallel()
	d := Start(t, Topology{Kind: ReplicaSet, Members: 3}, Options{Args: []string{"--keyFile", writeKeyfile(t)}})
	ctx := ctxT(t, 90*time.Second)
	primary, secondaries := waitPrimaryAndSecondaries(t, ctx, d)
	runRaw(ctx, t, d.DirectClient(primary).Database("admin"), bson.D{{Key: "createUser", Value: "app"}, {Key: "pwd", Value: "apppw"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "test"}}}}})
	onPrimary := connectUser(t, primary, "app", "apppw", "admin")
	first := waitForKeys(ctx, t, onPrimary)
	for _, sec := range secondaries {
		// The user reaches the secondary by replication (createUser waits for no write
		// concern yet): authenticate once it has.
		var onSec *mongo.Client
		for {
			onSec = connectUser(t, sec, "app", "apppw", "admin")
			if err := onSec.Ping(ctx, nil); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("app on %s: %v", sec.Name(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		g := waitForKeys(ctx, t, onSec)
		if g.sig.KeyID != first.sig.KeyID {
			t.Fatalf("%s signs with key %d, the primary with %d", sec.Name(), g.sig.KeyID, first.sig.KeyID)
		}
		// A write the secondary need not have yet: the primary's signed time is ahead of it.
		res, err := onPrimary.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
		if err != nil || res == nil {
			t.Fatal(err)
		}
		p := readGossiped(t, runRaw(ctx, t, onPrimary.Database("test"), bson.D{{Key: "find", Value: "c"}}))
		if _, err := findWithClusterTime(ctx, t, onSec, p.ct, p.sig); err != nil {
			t.Fatalf("%s refused the primary's signed %s: %v", sec.Name(), p.ct, err)
		}
		forged := p.sig
		forged.Hash[3] ^= 0xFF
		_, err = findWithClusterTime(ctx, t, onSec, optime.MakeTimestamp(p.ct.Secs()+600, 0), forged)
		wantCode(t, sec.Name()+": forged", err, mongoerr.TimeProofMismatch)
	}
}

// TestSignedClusterTimeShardUsesConfigServerKeys: in a sharded cluster with a keyfile the
// config server primary makes the keys and a shard reads them from it (once it is added):
// the shard signs with the config server's key, accepts the config server's signed time and
// refuses a forged one. The shard is added with _configsvrAddShard, as a router's addShard
// would.
func TestSignedClusterTimeShardUsesConfigServerKeys(t *testing.T) {
	t.Parallel()
	opts := Options{BinDir: MustBuild(t, "humongod"), Args: []string{"--keyFile", writeKeyfile(t)}, StartTimeout: defaultStartTimeout}
	d := &Deployment{}
	d.Config = startMemberSet(t, opts, ConfigSetName, 1, "--configsvr")
	shard := startMemberSet(t, opts, "shard0", 1, "--shardsvr")
	ctx := ctxT(t, 90*time.Second)
	if err := d.waitConfigCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	cfgNode, shardNode := d.Config.Nodes[0], shard.Nodes[0]
	runRaw(ctx, t, d.Config.DirectClient(cfgNode).Database("admin"), bson.D{{Key: "_configsvrAddShard", Value: shard.ConnectionString()},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}})
	for _, n := range []struct {
		d    *Deployment
		node *Process
	}{{d.Config, cfgNode}, {shard, shardNode}} {
		runRaw(ctx, t, n.d.DirectClient(n.node).Database("admin"), bson.D{{Key: "createUser", Value: "app"}, {Key: "pwd", Value: "apppw"},
			{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "test"}}}}})
	}
	onCfg := connectUser(t, cfgNode, "app", "apppw", "admin")
	onShard := connectUser(t, shardNode, "app", "apppw", "admin")
	c := waitForKeys(ctx, t, onCfg)
	s := waitForKeys(ctx, t, onShard)
	if s.sig.KeyID != c.sig.KeyID {
		t.Fatalf("the shard signs with key %d, the config server with %d", s.sig.KeyID, c.sig.KeyID)
	}
	if keys := readKeys(ctx, t, connectUser(t, shardNode, "__system", testKey, "local")); len(keys) != 0 {
		t.Fatalf("the shard made keys of its own: %v", keys)
	}
	// The config server's time, moved past the shard's by writes, validates on the shard.
	for {
		if _, err := onCfg.Database("test").Collection("c").InsertOne(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
		c = readGossiped(t, runRaw(ctx, t, onCfg.Database("test"), bson.D{{Key: "find", Value: "c"}}))
		s = readGossiped(t, runRaw(ctx, t, onShard.Database("test"), bson.D{{Key: "find", Value: "c"}}))
		if c.ct > s.ct {
			break
		}
	}
	if _, err := findWithClusterTime(ctx, t, onShard, c.ct, c.sig); err != nil {
		t.Fatalf("the shard refused the config server's signed %s: %v", c.ct, err)
	}
	forged := c.sig
	forged.Hash[0] ^= 0xFF
	_, err := findWithClusterTime(ctx, t, onShard, optime.MakeTimestamp(c.ct.Secs()+600, 0), forged)
	wantCode(t, "forged on the shard", err, mongoerr.TimeProofMismatch)
}

// TestSignedClusterTimeThroughRouter: a router signs its replies with the config servers'
// keys for a user without advanceClusterTime, and refuses that user's forged $clusterTime
// without moving its clock.
func TestSignedClusterTimeThroughRouter(t *testing.T) {
	if !AuthOn() {
		t.Skip("HUMONGO_TEST_NOAUTH: the harness runs without keyfiles")
	}
	t.Parallel()
	d := Start(t, Topology{Kind: Sharded, Shards: 1}, Options{})
	ctx := ctxT(t, 90*time.Second)
	// The harness's client is the internal user: it creates an application user through
	// the router (stored on the config servers).
	runRaw(ctx, t, d.Client.Database("admin"), bson.D{{Key: "createUser", Value: "app"}, {Key: "pwd", Value: "apppw"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "test"}}}}})
	app, err := mongo.Connect(options.Client().ApplyURI(d.URI).SetServerSelectionTimeout(10 * time.Second).
		SetAuth(options.Credential{Username: "app", Password: "apppw"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Disconnect(context.Background()) })
	if _, err := app.Database("test").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	signed := waitForKeys(ctx, t, app)
	forged := optime.MakeTimestamp(signed.ct.Secs()+86400, 1)
	_, err = findWithClusterTime(ctx, t, app, forged, vclock.Signature{KeyID: signed.sig.KeyID})
	wantCode(t, "a forged $clusterTime through the router", err, mongoerr.TimeProofMismatch)
	if g := readGossiped(t, runRaw(ctx, t, app.Database("test"), bson.D{{Key: "find", Value: "c"}})); g.ct >= forged {
		t.Fatalf("the router's clock moved to the forged time: %s", g.ct)
	}
}
