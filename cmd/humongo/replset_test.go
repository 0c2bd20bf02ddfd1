package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// TestUpReplicaSet is issue 5 item 12: `humongo up --replset 3` starts three members,
// initiates them as rs0, prints the replica-set connection string, and `status` shows one
// PRIMARY and two SECONDARY; a driver with that URI writes; `down` stops all three.
func TestUpReplicaSet(t *testing.T) {
	buildBinaries(t)
	dir := filepath.Join(t.TempDir(), "rs")
	// Three ports reserved from the kernel, not one plus the two after it, which may be taken.
	ports, out, errs, code := upRetrying(t, 3, "up", "--replset", "3", "--dir", dir)
	t.Cleanup(func() {
		if st, err := readState(dir); err == nil {
			stopAll(st, &strings.Builder{}, 5*time.Second)
		}
	})
	if code != 0 {
		t.Fatalf("up --replset 3: exit %d\n%s%s", code, out, errs)
	}
	uri := fmt.Sprintf("mongodb://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/?replicaSet=rs0", ports[0], ports[1], ports[2])
	if !strings.Contains(out, "replset deployment is up: "+uri+"\n") {
		t.Errorf("up did not print the connection string %s:\n%s", uri, out)
	}

	out, errs, code = humongo(t, "status", "--json", "--dir", dir)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if rep.Topology != "replset" || rep.URI != uri || len(rep.Processes) != 3 {
		t.Fatalf("status: %+v", rep)
	}
	states := map[string]int{}
	for _, p := range rep.Processes {
		if p.State != "running" || p.ReplSet != "rs0" || p.Hello == nil || p.Hello.SetName != "rs0" {
			t.Errorf("member %+v", p)
			continue
		}
		states[p.Hello.StateStr]++
		if want := strings.ToLower(p.Hello.StateStr); p.HelloRole != want {
			t.Errorf("%s: hello role %q, replSetGetStatus %q", p.Name, p.HelloRole, p.Hello.StateStr)
		}
	}
	if states["PRIMARY"] != 1 || states["SECONDARY"] != 2 {
		t.Errorf("member states %v, want 1 PRIMARY and 2 SECONDARY", states)
	}
	table, _, _ := humongo(t, "status", "--dir", dir)
	if !strings.Contains(table, "rs0/PRIMARY") || strings.Count(table, "rs0/SECONDARY") != 2 || !strings.Contains(table, uri) {
		t.Errorf("status table:\n%s", table)
	}

	// The driver discovers the set from the URI and writes to the primary.
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer func() { _ = client.Disconnect(ctx) }()
	if _, err := client.Database("test").Collection("c", options.Collection().SetWriteConcern(writeconcern.W1())).InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert through %s: %v", uri, err)
	}

	out, errs, code = humongo(t, "down", "--dir", dir)
	if code != 0 || strings.Count(out, "stopped") != 3 {
		t.Fatalf("down: exit %d\n%s%s", code, out, errs)
	}
	st, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Processes {
		if p.Pid != 0 {
			t.Errorf("%s still has pid %d after down", p.Name, p.Pid)
		}
	}
}
