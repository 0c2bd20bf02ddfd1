package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestUpSharded: `humongo up --shards 2 --auth` starts two single-member shards, a config
// server and a router with a keyfile, adds the shards, creates the first user and prints the
// router's URI with its credentials; listShards through it shows both; unauthenticated
// clients of the router and of a shard are refused, as is a peer with another key; `status`
// names each process's role; `down` stops all four.
func TestUpSharded(t *testing.T) {
	buildBinaries(t)
	if _, err := os.Stat(filepath.Join(binDir, "humongos")); err != nil {
		if out, err := exec.Command("go", "build", "-o", binDir+"/", "humongo/cmd/humongos").CombinedOutput(); err != nil {
			t.Skipf("SKIP: humongos does not build (outside this package): %v\n%s", err, out)
		}
	}
	dir := filepath.Join(t.TempDir(), "sh")
	start := time.Now()
	ports, out, errs, code := upRetrying(t, 4, "up", "--shards", "2", "--auth", "--dir", dir)
	t.Cleanup(func() {
		if st, err := readState(dir); err == nil {
			stopAll(st, &strings.Builder{}, 5*time.Second)
		}
	})
	if code != 0 {
		t.Fatalf("up --shards 2: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("up --shards 2 took %v", time.Since(start))
	uri := fmt.Sprintf("mongodb://127.0.0.1:%d/", ports[3])
	pw, err := adminPassword(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "sharded deployment is up: "+withCredentials(uri, pw)+"\n") || strings.Count(out, "adding shard") != 2 {
		t.Errorf("up did not print the router's URI %s with credentials:\n%s", uri, out)
	}

	client, err := mongo.Connect(options.Client().ApplyURI(withCredentials(uri, pw)).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer func() { _ = client.Disconnect(ctx) }()
	refused := func(what, uri string, cred *options.Credential, code int32) {
		t.Helper()
		o := options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second)
		if cred != nil {
			o.SetAuth(*cred)
		}
		cl, err := mongo.Connect(o)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cl.Disconnect(ctx) }()
		var ce mongo.CommandError
		if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "listDatabases", Value: 1}}).Err(); !errors.As(err, &ce) || ce.Code != code {
			t.Errorf("%s: %v, want code %d", what, err, code)
		}
	}
	shard0 := fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ports[0])
	refused("the router without authentication", uri, nil, 13)
	refused("a shard without authentication", shard0, nil, 13)
	refused("a shard as the internal user with another key", shard0,
		&options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: "local", Username: "__system", Password: "anotherkey"}, 18)
	var ls struct {
		Shards []struct {
			ID   string `bson:"_id"`
			Host string `bson:"host"`
		} `bson:"shards"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Decode(&ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Shards) != 2 || ls.Shards[0].ID != "rs0" || ls.Shards[0].Host != fmt.Sprintf("rs0/127.0.0.1:%d", ports[0]) ||
		ls.Shards[1].ID != "rs1" {
		t.Errorf("listShards: %+v", ls)
	}

	// A sharded collection of two chunks: status counts them per shard.
	admin := client.Database("admin")
	for _, cmd := range []bson.D{
		{{Key: "enableSharding", Value: "st"}, {Key: "primaryShard", Value: "rs1"}},
		{{Key: "shardCollection", Value: "st.c"}, {Key: "key", Value: bson.D{{Key: "x", Value: 1}}}},
		{{Key: "split", Value: "st.c"}, {Key: "middle", Value: bson.D{{Key: "x", Value: 0}}}},
	} {
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}

	out, errs, code = humongo(t, "status", "--json", "--dir", dir)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	var roles []string
	for _, p := range rep.Processes {
		roles = append(roles, p.Role+"/"+p.HelloRole)
	}
	if rep.Topology != "sharded" || rep.URI != uri || strings.Join(roles, " ") != "shard/primary shard/primary config/primary router/router" {
		t.Errorf("status: %s, %s, roles %v", rep.Topology, rep.URI, roles)
	}
	if sh := rep.Sharding; sh == nil || sh.Error != "" || len(sh.Shards) != 2 || len(sh.Collections) != 1 ||
		sh.Collections[0].NS != "st.c" || sh.Collections[0].Total != 2 || sh.Collections[0].Chunks["rs1"] != 2 {
		t.Errorf("status sharding: %+v", rep.Sharding)
	}
	table, _, _ := humongo(t, "status", "--dir", dir)
	if !strings.Contains(table, "config server") || strings.Count(table, " shard ") != 2 || !strings.Contains(table, uri) ||
		!strings.Contains(table, "rs1: 2") {
		t.Errorf("status table:\n%s", table)
	}

	out, errs, code = humongo(t, "down", "--dir", dir)
	if code != 0 || strings.Count(out, "stopped") != 4 {
		t.Fatalf("down: exit %d\n%s%s", code, out, errs)
	}
}
