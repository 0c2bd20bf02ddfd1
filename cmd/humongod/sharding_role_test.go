package main

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
)

// connect returns a direct client of p.
func connect(t *testing.T, p *cluster.Process) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI(p.URI()).SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

// waitFor polls cond until it holds (bounded: a broken server fails the test, not hangs it).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func serverStatusSharding(ctx context.Context, cl *mongo.Client) (bson.Raw, bool) {
	raw, err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw()
	if err != nil {
		return nil, false
	}
	d, ok := raw.Lookup("sharding").DocumentOK()
	return d, ok
}

// configCmdOps counts the oplog's DDL entries on the config database.
func configCmdOps(ctx context.Context, t *testing.T, cl *mongo.Client) int64 {
	t.Helper()
	n, err := cl.Database("local").Collection("oplog.rs").CountDocuments(ctx, bson.D{{Key: "ns", Value: "config.$cmd"}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConfigServerCatalog(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongod"), "humongod")
	p := cluster.StartProcess(t, cluster.ProcessOptions{Name: "cfg0", Binary: bin, Dir: t.TempDir(),
		Args: []string{"--configsvr", "--replSet", "cfg", "--bind_ip", "127.0.0.1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := connect(t, p)
	admin := cl.Database("admin")

	// A config server refuses a config without configsvr: true.
	member := bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: p.Addr()}}}
	err := admin.RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: "cfg"}, {Key: "members", Value: member}}}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.InvalidReplicaSetConfig) ||
		!strings.Contains(ce.Message, "Nodes started with the --configsvr flag must have configsvr:true in their config") {
		t.Fatalf("initiate without configsvr: %v", err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: "cfg"},
		{Key: "configsvr", Value: true}, {Key: "members", Value: member}}}}).Err(); err != nil {
		t.Fatalf("initiate: %v", err)
	}
	var ss bson.Raw
	waitFor(t, "the config server to become shard-aware", func() bool {
		var ok bool
		ss, ok = serverStatusSharding(ctx, cl)
		return ok
	})
	if got := ss.Lookup("configsvrConnectionString").StringValue(); got != "cfg/"+p.Addr() {
		t.Errorf("serverStatus.sharding.configsvrConnectionString = %q", got)
	}
	raw, err := admin.RunCommand(ctx, bson.D{{Key: "replSetGetConfig", Value: 1}}).Raw()
	if err != nil || !raw.Lookup("config", "configsvr").Boolean() {
		t.Errorf("replSetGetConfig: %v %v", raw, err)
	}
	// hello carries mongod's configServerModeNumber on a config server.
	raw, err = admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	if v, ok := raw.Lookup("configsvr").Int32OK(); err != nil || !ok || v != 2 {
		t.Errorf("hello: configsvr %v, %v", raw.Lookup("configsvr"), err)
	}

	config := cl.Database("config")
	names, err := config.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, want := range []string{"shards", "databases", "collections", "chunks", "tags", "settings", "version"} {
		if !have[want] {
			t.Errorf("config.%s missing; have %v", want, names)
		}
	}
	indexes := func(coll string) string {
		cur, err := config.Collection(coll).Indexes().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var specs []struct {
			Name   string `bson:"name"`
			Unique bool   `bson:"unique"`
		}
		if err := cur.All(ctx, &specs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range specs {
			if s.Unique {
				s.Name += "(unique)"
			}
			out = append(out, s.Name)
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	for coll, want := range map[string]string{
		"chunks": "_id_ uuid_1_lastmod_1(unique) uuid_1_min_1(unique) uuid_1_shard_1_min_1(unique) uuid_1_shard_1_onCurrentShardSince_1",
		"shards": "_id_ host_1(unique)",
		"tags":   "_id_ ns_1_min_1(unique) ns_1_tag_1",
	} {
		if got := indexes(coll); got != want {
			t.Errorf("config.%s indexes: %s, want %s", coll, got, want)
		}
	}
	var version struct {
		ID        int32         `bson:"_id"`
		ClusterID bson.ObjectID `bson:"clusterId"`
	}
	if err := config.Collection("version").FindOne(ctx, bson.D{}).Decode(&version); err != nil || version.ID != 1 || version.ClusterID.IsZero() {
		t.Fatalf("config.version: %+v %v", version, err)
	}
	ddl := configCmdOps(ctx, t, cl)
	if ddl == 0 {
		t.Fatalf("no config DDL in the oplog: the catalog was not replicated")
	}

	// After a restart the new primary finds everything in place and writes nothing.
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cl = connect(t, p)
	waitFor(t, "the restarted config server to become shard-aware", func() bool {
		_, ok := serverStatusSharding(ctx, cl)
		return ok
	})
	var again struct {
		ClusterID bson.ObjectID `bson:"clusterId"`
	}
	if err := cl.Database("config").Collection("version").FindOne(ctx, bson.D{}).Decode(&again); err != nil || again.ClusterID != version.ClusterID {
		t.Errorf("clusterId after restart: %v (was %v), %v", again.ClusterID, version.ClusterID, err)
	}
	if n, _ := cl.Database("config").Collection("version").CountDocuments(ctx, bson.D{}); n != 1 {
		t.Errorf("config.version has %d documents", n)
	}
	if got := configCmdOps(ctx, t, cl); got != ddl {
		t.Errorf("config DDL entries after the restart: %d, were %d", got, ddl)
	}
}

func TestShardServerIdentity(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongod"), "humongod")
	p := cluster.StartProcess(t, cluster.ProcessOptions{Name: "rs0", Binary: bin, Dir: t.TempDir(),
		Args: []string{"--shardsvr", "--replSet", "rs0", "--bind_ip", "127.0.0.1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := connect(t, p)
	admin := cl.Database("admin")
	// A shard's set is an ordinary one: configsvr: true is refused.
	member := bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: p.Addr()}}}
	err := admin.RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: "rs0"},
		{Key: "configsvr", Value: true}, {Key: "members", Value: member}}}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "Nodes being used for config servers must be started with the --configsvr flag") {
		t.Fatalf("initiate with configsvr on a shard: %v", err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: 1}}).Err(); err != nil {
		t.Fatalf("initiate: %v", err)
	}
	waitFor(t, "primary", func() bool {
		var h struct {
			W bool `bson:"isWritablePrimary"`
		}
		return admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h) == nil && h.W
	})
	if _, ok := serverStatusSharding(ctx, cl); ok {
		t.Fatalf("serverStatus.sharding before the shard identity")
	}
	if raw, err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw(); err != nil || raw.Lookup("configsvr").Type != 0 {
		t.Errorf("hello on a shard: %v %v", raw, err)
	}
	versions := admin.Collection("system.version")
	clusterID := bson.NewObjectID()
	for _, tc := range []struct {
		doc  bson.D
		code mongoerr.Code
		msg  string
	}{
		{bson.D{{Key: "_id", Value: "shardIdentity"}, {Key: "shardName", Value: "rs0"},
			{Key: "configsvrConnectionString", Value: "cfg/h:1"}}, mongoerr.Location40414,
			"BSON field 'ShardIdentity.clusterId' is missing but a required field"},
		{bson.D{{Key: "_id", Value: "shardIdentity"}, {Key: "shardName", Value: 5}, {Key: "clusterId", Value: clusterID},
			{Key: "configsvrConnectionString", Value: "cfg/h:1"}}, mongoerr.TypeMismatch,
			"BSON field 'ShardIdentity.shardName' is the wrong type 'int', expected type 'string'"},
		{bson.D{{Key: "_id", Value: "shardIdentity"}, {Key: "shardName", Value: "rs0"}, {Key: "clusterId", Value: clusterID},
			{Key: "configsvrConnectionString", Value: "h:1"}}, mongoerr.UnsupportedFormat,
			"config server connection string can only be replica sets: h:1"},
	} {
		_, err := versions.InsertOne(ctx, tc.doc)
		var we mongo.WriteException
		if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != int(tc.code) ||
			!strings.Contains(we.WriteErrors[0].Message, tc.msg) {
			t.Errorf("insert %v: %v, want code %d %q", tc.doc, err, tc.code, tc.msg)
		}
	}
	if _, ok := serverStatusSharding(ctx, cl); ok {
		t.Fatalf("a refused identity made the shard aware")
	}
	if _, err := versions.InsertOne(ctx, bson.D{{Key: "_id", Value: "shardIdentity"}, {Key: "shardName", Value: "rs0"},
		{Key: "clusterId", Value: clusterID}, {Key: "configsvrConnectionString", Value: "cfg/h1:1,h2:2"}}); err != nil {
		t.Fatal(err)
	}
	ss, ok := serverStatusSharding(ctx, cl)
	if !ok || ss.Lookup("configsvrConnectionString").StringValue() != "cfg/h1:1,h2:2" {
		t.Fatalf("serverStatus.sharding after the identity insert: %v", ss)
	}
	// Shard-aware again at startup, from the document on disk.
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cl = connect(t, p)
	if ss, ok := serverStatusSharding(ctx, cl); !ok || ss.Lookup("configsvrConnectionString").StringValue() != "cfg/h1:1,h2:2" {
		t.Fatalf("serverStatus.sharding after restart: %v", ss)
	}
}

// TestShardSecondaryBecomesAware: the shardIdentity document inserted on a shard's primary
// makes its secondary shard-aware once replicated.
func TestShardSecondaryBecomesAware(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongod"), "humongod")
	dir := t.TempDir()
	args := []string{"--shardsvr", "--replSet", "rs1", "--bind_ip", "127.0.0.1"}
	p0 := cluster.StartProcess(t, cluster.ProcessOptions{Name: "n0", Binary: bin, Dir: dir, Args: args})
	p1 := cluster.StartProcess(t, cluster.ProcessOptions{Name: "n1", Binary: bin, Dir: dir, Args: args})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c0, c1 := connect(t, p0), connect(t, p1)
	members := bson.A{bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: p0.Addr()}},
		bson.D{{Key: "_id", Value: 1}, {Key: "host", Value: p1.Addr()}, {Key: "priority", Value: 0}}}
	if err := c0.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: bson.D{{Key: "_id", Value: "rs1"},
		{Key: "members", Value: members}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a primary", func() bool {
		var h struct {
			W bool `bson:"isWritablePrimary"`
		}
		return c0.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h) == nil && h.W
	})
	if _, ok := serverStatusSharding(ctx, c1); ok {
		t.Fatal("the secondary is shard-aware before any identity")
	}
	if _, err := c0.Database("admin").Collection("system.version").InsertOne(ctx, bson.D{{Key: "_id", Value: "shardIdentity"},
		{Key: "shardName", Value: "rs1"}, {Key: "clusterId", Value: bson.NewObjectID()},
		{Key: "configsvrConnectionString", Value: "cfg/h:1"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the secondary to become shard-aware", func() bool {
		ss, ok := serverStatusSharding(ctx, c1)
		return ok && ss.Lookup("configsvrConnectionString").StringValue() == "cfg/h:1"
	})
}
