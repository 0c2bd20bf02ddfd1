package main

import (
	"context"
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

// TestBenchShardKey: `humongo bench --shard-key` against `humongo up --shards 2` shards the
// benchmark collection through the router (hashed: records on both shards; range: one chunk,
// all on the primary shard; again after --drop), a second run on the same key is accepted, a
// run on another key without --drop fails with shardCollection's error, the scan workload runs
// scatter-gather through the router, and a target that is not a router is refused.
func TestBenchShardKey(t *testing.T) {
	buildBinaries(t)
	if _, err := os.Stat(filepath.Join(binDir, "humongos")); err != nil {
		if out, err := exec.Command("go", "build", "-o", binDir+"/", "humongo/cmd/humongos").CombinedOutput(); err != nil {
			t.Skipf("SKIP: humongos does not build (outside this package): %v\n%s", err, out)
		}
	}
	dir := filepath.Join(t.TempDir(), "sh")
	ports, out, errs, code := upRetrying(t, 4, "up", "--shards", "2", "--dir", dir)
	t.Cleanup(func() {
		if st, err := readState(dir); err == nil {
			stopAll(st, &strings.Builder{}, 5*time.Second)
		}
	})
	if code != 0 {
		t.Fatalf("up --shards 2: exit %d\n%s%s", code, out, errs)
	}
	router := fmt.Sprintf("mongodb://127.0.0.1:%d/", ports[3])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(uri string) *mongo.Client {
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
		return c
	}
	rc := connect(router)
	shards := []*mongo.Client{
		connect(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ports[0])),
		connect(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ports[1])),
	}
	// check asserts the collection's shard key in config.collections and the records each
	// shard holds (read directly: an unversioned read sees every document, no orphans here).
	check := func(what string, key bson.D, split bool) {
		t.Helper()
		var coll struct {
			Key bson.D `bson:"key"`
		}
		if err := rc.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "ycsb.usertable"}}).Decode(&coll); err != nil {
			t.Fatalf("%s: config.collections: %v", what, err)
		}
		if fmt.Sprint(coll.Key) != fmt.Sprint(key) {
			t.Errorf("%s: shard key %v, want %v", what, coll.Key, key)
		}
		var n [2]int64
		for i, s := range shards {
			c, err := s.Database("ycsb").Collection("usertable").CountDocuments(ctx, bson.D{})
			if err != nil {
				t.Fatalf("%s: count on shard %d: %v", what, i, err)
			}
			n[i] = c
		}
		if n[0]+n[1] != 400 || split != (n[0] > 0 && n[1] > 0) {
			t.Errorf("%s: records on the shards %v, want 400 in all, on both shards: %v", what, n, split)
		}
	}

	bench := func(args ...string) (string, int) {
		t.Helper()
		out, errs, code := humongo(t, append([]string{"bench"}, append(args, "--uri", router, "--progress", "0")...)...)
		return out + errs, code
	}
	if out, code := bench("load", "--shard-key", "hashed", "--drop", "--records", "400", "--threads", "4"); code != 0 {
		t.Fatalf("bench load --shard-key hashed: exit %d\n%s", code, out)
	}
	check("hashed", bson.D{{Key: "_id", Value: "hashed"}}, true)
	// Same key, no --drop: shardCollection is idempotent; scans go to both shards and merge.
	if out, code := bench("scan", "--shard-key", "hashed", "--records", "400", "--ops", "50",
		"--scan-length-distribution", "constant", "--max-scan-length", "100"); code != 0 || !strings.Contains(out, "SCAN") {
		t.Fatalf("bench scan --shard-key hashed: exit %d\n%s", code, out)
	}
	if out, code := bench("c", "--shard-key", "range", "--records", "400", "--ops", "10"); code == 0 ||
		!strings.Contains(out, "AlreadyInitialized") {
		t.Errorf("bench c --shard-key range on a hashed collection: exit %d, want AlreadyInitialized\n%s", code, out)
	}
	if out, code := bench("load", "--shard-key", "range", "--drop", "--records", "400", "--threads", "4"); code != 0 {
		t.Fatalf("bench load --shard-key range: exit %d\n%s", code, out)
	}
	check("range", bson.D{{Key: "_id", Value: int32(1)}}, false)

	direct := fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ports[0])
	out, errs, code = humongo(t, "bench", "c", "--shard-key", "hashed", "--uri", direct, "--records", "10", "--ops", "10")
	if code == 0 || !strings.Contains(errs, `needs a router`) {
		t.Errorf("bench --shard-key against a shard: exit %d, want a refusal\n%s%s", code, out, errs)
	}
}
