package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
	"humongo/internal/process"
)

func TestRouterSkeleton(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongos"), "humongos")
	p := cluster.StartProcess(t, cluster.ProcessOptions{Name: "humongos", Binary: bin, Dir: t.TempDir(), NoDBPath: true,
		Args: []string{"--configdb", "cfg/127.0.0.1:1", "--bind_ip", "127.0.0.1"}})
	port := p.Port()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/", port)).
		SetServerSelectionTimeout(30 * time.Second).SetRetryWrites(false)
	// The harness starts the router with its keyfile: without config servers to ask whether
	// users exist, the localhost exception cannot apply, so the test is the internal user.
	if c, ok := cluster.InternalCredential(); ok {
		o.SetAuth(c)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	admin := cl.Database("admin")

	var hello struct {
		Msg               string `bson:"msg"`
		IsWritablePrimary bool   `bson:"isWritablePrimary"`
		MaxWireVersion    int32  `bson:"maxWireVersion"`
		SetName           string `bson:"setName"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.Msg != "isdbgrid" || !hello.IsWritablePrimary || hello.MaxWireVersion != 21 || hello.SetName != "" {
		t.Fatalf("hello = %+v, want msg isdbgrid, writable, maxWireVersion 21, no setName", hello)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	var bi struct {
		Version string `bson:"version"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil || bi.Version == "" {
		t.Fatalf("buildInfo: %+v, %v", bi, err)
	}
	var ss struct {
		Process string `bson:"process"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&ss); err != nil || ss.Process != "mongos" {
		t.Fatalf("serverStatus: %+v, %v", ss, err)
	}

	// A MongoDB command the router does not route yet fails clearly, not as an unknown one.
	err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "dataSize", Value: "test.c"}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.CommandNotSupported) ||
		!strings.Contains(ce.Message, "dataSize is not supported by humongos") {
		t.Fatalf("dataSize: got %v, want CommandNotSupported naming dataSize", err)
	}
	err = admin.RunCommand(ctx, bson.D{{Key: "noSuchCommandAnywhere", Value: 1}}).Err()
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.CommandNotFound) {
		t.Fatalf("unknown command: got %v, want CommandNotFound", err)
	}

	// Stop sends SIGTERM and fails unless the exit code is 0.
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestBadConfigDBRefused(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongos"), "humongos")
	for _, args := range [][]string{
		{},                                    // --configdb is required
		{"--configdb", "127.0.0.1:1"},         // not a replica-set connection string
		{"--configdb", "cfg/"},                // no host
		{"--configdb", "cfg/127.0.0.1:0x"},    // bad port
		{"--configdb", "cfg/h:1,,h2:2"},       // empty host
		{"--configdb", "cfg/127.0.0.1:99999"}, // port out of range
	} {
		cmd := exec.Command(bin, append([]string{"--port", "0"}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != process.ExitBadOptions {
			t.Errorf("%q: exit %v, want %d (output %s)", args, err, process.ExitBadOptions, out)
		}
	}
}

func TestParseConfigDB(t *testing.T) {
	for _, tc := range []struct {
		in, set, hosts, err string
	}{
		{in: "cfg/a:1,b:2", set: "cfg", hosts: "a:1 b:2"},
		{in: "cfg/a,b:2", set: "cfg", hosts: "a:27019 b:2"}, // a host without a port: 27019
		{in: "cfg/[::1]", set: "cfg", hosts: "[::1]:27019"},
		{in: "a:1", err: "BadValue: configdb supports only replica set connection string"},
		{in: "/a:1", err: "BadValue: configdb supports only replica set connection string"},
		{in: "a:1,b:2", err: "FailedToParse: invalid url [a:1,b:2]"},
		{in: "cfg/", err: `FailedToParse: Empty host component parsing HostAndPort from ""`},
		{in: "cfg/a:1,,b:2", err: "FailedToParse: Empty host component"},
		{in: "cfg/a:99999", err: "FailedToParse: Port number 99999 out of range"},
	} {
		set, hosts, err := parseConfigDB(tc.in)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || set != tc.set || strings.Join(hosts, " ") != tc.hosts {
			t.Errorf("%q = %q %q %v, want %q %q", tc.in, set, hosts, err, tc.set, tc.hosts)
		}
	}
	if _, err := parseOptions([]string{"--port", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "BadValue: error: no args for --configdb") {
		t.Errorf("no --configdb: %v", err)
	}
}

func TestConfigFileAndFlagPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mongos.yaml")
	yml := "net:\n  port: 27100\n  bindIp: 127.0.0.1,::1\nsharding:\n  configDB: cfg/h1:1,h2:2\nsetParameter:\n  quiet: true\n"
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"--config", path, "--port", "27200"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 27200 || len(o.BindIPs) != 2 || o.ConfigSet != "cfg" || len(o.ConfigHosts) != 2 ||
		len(o.SetParameters) != 1 || o.SetParameters[0] != [2]string{"quiet", "true"} {
		t.Fatalf("options = %+v", o)
	}
	if err := os.WriteFile(path, []byte("sharding:\n  unknownKey: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseOptions([]string{"--config", path, "--configdb", "cfg/h:1"}, io.Discard); !errors.Is(err, process.ErrBadOptions) {
		t.Fatalf("unknown config key: %v", err)
	}
}
