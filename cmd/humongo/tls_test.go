package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// --tls starts every process, routers included, in requireTLS with the deployment's files,
// records the CA for status and down, and puts it in every connection string.
func TestPlanTLS(t *testing.T) {
	o, err := parseUpFlags([]string{"--shards", "1", "--tls"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ps := plan(o, "/d")
	for _, p := range ps {
		args := strings.Join(p.Args, " ")
		if !strings.Contains(args, "--tlsMode requireTLS --tlsCertificateKeyFile /d/tls/server.pem --tlsCAFile /d/tls/ca.pem --tlsAllowConnectionsWithoutCertificates") ||
			p.TLSCAFile != "/d/tls/ca.pem" {
			t.Errorf("%s: args %q, CA %q", p.Name, args, p.TLSCAFile)
		}
	}
	if u := ps[0].uri(); u != fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true&tls=true&tlsCAFile=/d/tls/ca.pem", ps[0].Port) {
		t.Errorf("member URI %s", u)
	}
	if u := routerURI(ps); !strings.HasSuffix(u, "/?tls=true&tlsCAFile=/d/tls/ca.pem") {
		t.Errorf("router URI %s", u)
	}
	if u := replicaSetURI(ps[:1]); !strings.HasSuffix(u, "/?replicaSet=rs0&tls=true&tlsCAFile=/d/tls/ca.pem") {
		t.Errorf("replica set URI %s", u)
	}
	if q := tlsQuery("/a dir/ca&.pem"); q != "tls=true&tlsCAFile=/a+dir/ca%26.pem" {
		t.Errorf("escaped CA path %s", q)
	}
	if v, _ := url.ParseQuery(tlsQuery("/a dir/ca&.pem")); v.Get("tlsCAFile") != "/a dir/ca&.pem" {
		t.Errorf("CA path does not round-trip: %v", v)
	}
	o, _ = parseUpFlags(nil, &bytes.Buffer{})
	if p := plan(o, "/d")[0]; strings.Contains(strings.Join(p.Args, " "), "tls") || p.TLSCAFile != "" || strings.Contains(p.uri(), "tls") {
		t.Errorf("plain plan: %+v", p)
	}
}

// `humongo up --replset 3 --tls --auth` starts a replica set whose members talk TLS to each
// other and authenticate with the keyfile: it elects a primary, replicates a majority write
// for the first user, status and down work through the recorded CA and keyfile, and a plain
// client is refused, as is an unauthenticated one.
func TestUpReplicaSetTLS(t *testing.T) {
	buildBinaries(t)
	dir := filepath.Join(t.TempDir(), "rs")
	ports, out, errs, code := upRetrying(t, 3, "up", "--replset", "3", "--tls", "--auth", "--dir", dir)
	t.Cleanup(func() {
		if st, err := readState(dir); err == nil {
			stopAll(st, &strings.Builder{}, 5*time.Second)
		}
	})
	if code != 0 {
		t.Fatalf("up --replset 3 --tls: exit %d\n%s%s", code, out, errs)
	}
	ca := filepath.Join(dir, "tls", "ca.pem")
	uri := fmt.Sprintf("mongodb://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/?replicaSet=rs0&tls=true&tlsCAFile=%s",
		ports[0], ports[1], ports[2], ca)
	pw, err := adminPassword(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "replset deployment is up: "+withCredentials(uri, pw)+"\n") {
		t.Fatalf("up did not print the TLS connection string with credentials %s:\n%s", uri, out)
	}
	for _, f := range []string{"keyfile", "credentials"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, st, err)
		}
	}
	for _, f := range []string{"ca.pem", "ca-key.pem", "server.pem", "client.pem"} {
		if _, err := os.Stat(filepath.Join(dir, "tls", f)); err != nil {
			t.Errorf("TLS file: %v", err)
		}
	}

	client, err := mongo.Connect(options.Client().ApplyURI(withCredentials(uri, pw)).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() { _ = client.Disconnect(context.Background()) }()
	anon, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = anon.Disconnect(context.Background()) }()
	var ce mongo.CommandError
	if err := anon.Database("test").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}}).Err(); !errors.As(err, &ce) || ce.Code != 13 {
		t.Errorf("unauthenticated find: %v, want Unauthorized", err)
	}
	// w:3 is acknowledged only once both secondaries have fetched the write over TLS.
	coll := client.Database("test").Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: 3}))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "tls"}}); err != nil {
		t.Fatalf("w:3 insert over TLS: %v", err)
	}
	secondary := client.Database("test").Collection("c", options.Collection().SetReadPreference(readpref.Secondary()))
	if n, err := secondary.CountDocuments(ctx, bson.D{{Key: "_id", Value: "tls"}}); err != nil || n != 1 {
		t.Errorf("read from a secondary: %d %v", n, err)
	}

	plain, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ports[0])).
		SetServerSelectionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Disconnect(context.Background()) }()
	if err := plain.Ping(ctx, nil); err == nil {
		t.Error("a plain client connected to a --tls deployment")
	}

	out, errs, code = humongo(t, "status", "--json", "--dir", dir)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	states := map[string]int{}
	for _, p := range rep.Processes {
		if p.Hello != nil {
			states[p.Hello.StateStr]++
		}
	}
	if rep.URI != uri || states["PRIMARY"] != 1 || states["SECONDARY"] != 2 {
		t.Errorf("status over TLS: %s", out)
	}
	out, errs, code = humongo(t, "down", "--dir", dir)
	if code != 0 || strings.Count(out, "stopped") != 3 {
		t.Fatalf("down: exit %d\n%s%s", code, out, errs)
	}
}
