package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
	"humongo/internal/process"
)

func TestStorageOptions(t *testing.T) {
	o, err := parseOptions([]string{"--storageEngine", "wiredTiger", "--wiredTigerCacheSizeGB", "0.5", "--nojournal",
		"--wiredTigerCollectionBlockCompressor", "zstd"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if warn, err := o.checkStorageEngine(); !warn || err != nil || o.cacheBytes() != 512<<20 {
		t.Errorf("wiredTiger: warn %v err %v cache %d", warn, err, o.cacheBytes())
	}
	if got := strings.Join(o.Warnings, " "); got != "--nojournal --wiredTigerCollectionBlockCompressor" {
		t.Errorf("warnings %q", got)
	}
	if v, _ := o.parsed().LookupErr("storage", "wiredTiger", "engineConfig", "cacheSizeGB"); v.Double() != 0.5 {
		t.Errorf("parsed: %v", o.parsed())
	}

	cfg := filepath.Join(t.TempDir(), "c.yaml")
	yml := "storage:\n  engine: wiredTiger\n  directoryPerDB: true\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 2\n      journalCompressor: snappy\n    collectionConfig:\n      blockCompressor: zstd\n"
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = parseOptions([]string{"--config", cfg}, io.Discard)
	if err != nil || o.cacheBytes() != 2<<30 || o.StorageEngine != "wiredTiger" || len(o.Warnings) != 3 {
		t.Errorf("config: %+v %v", o, err)
	}

	// Accepted without meaning: a warning; a security option Humongo cannot honour: refused;
	// authorization: honoured.
	if err := os.WriteFile(cfg, []byte("security:\n  javascriptEnabled: false\noperationProfiling:\n  mode: slowOp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err = parseOptions([]string{"--config", cfg, "--noscripting"}, io.Discard); err != nil ||
		strings.Join(o.Warnings, " ") != "--noscripting operationProfiling.mode security.javascriptEnabled" {
		t.Errorf("warnings %v, %v", o, err)
	}
	if err := os.WriteFile(cfg, []byte("security:\n  authorization: enabled\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := parseOptions([]string{"--config", cfg}, io.Discard); err != nil || !o.Auth {
		t.Errorf("security.authorization: %+v %v", o, err)
	}
	if err := os.WriteFile(cfg, []byte("security:\n  enableEncryption: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseOptions([]string{"--config", cfg}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "security.enableEncryption") {
		t.Errorf("security.enableEncryption: %v", err)
	}

	o, err = parseOptions([]string{"--storageEngine", "mmapv1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.checkStorageEngine(); mongoerr.CodeOf(err) != 18656 ||
		!strings.Contains(err.Error(), "Cannot start server with an unknown storage engine: mmapv1") {
		t.Errorf("mmapv1: %v", err)
	}
	if _, err := parseOptions([]string{"--wiredTigerCacheSizeGB", "0.1"}, io.Discard); !errors.Is(err, process.ErrBadOptions) {
		t.Errorf("cache 0.1 GB: %v", err)
	}
	var out strings.Builder
	if code := run([]string{"humongod", "--fork", "--dbpath", t.TempDir()}, io.Discard, &out); code != process.ExitBadOptions ||
		!strings.Contains(out.String(), "--fork has to be used with --logpath or --syslog") {
		t.Errorf("--fork without --logpath: exit %d %s", code, out.String())
	}
	if code := run([]string{"humongod", "--storageEngine", "inMemory", "--dbpath", t.TempDir(), "--port", "0"}, &out, io.Discard); code != process.ExitUncaught ||
		!strings.Contains(out.String(), "Cannot start server with an unknown storage engine: inMemory") {
		t.Errorf("--storageEngine inMemory: exit %d", code)
	}
}

var waitingPort = regexp.MustCompile(`"msg":"Waiting for connections","attr":\{"port":(\d+)`)

// waitLogPort waits until the log file at path says the server waits for connections and
// returns its port.
func waitLogPort(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(path)
		if m := waitingPort.FindSubmatch(data); m != nil {
			port, _ := strconv.Atoi(string(m[1]))
			return port
		}
		time.Sleep(50 * time.Millisecond)
	}
	data, _ := os.ReadFile(path)
	t.Fatalf("server never ready; log:\n%s", data)
	return 0
}

func ping(t *testing.T, addr string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true").
		SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	return cl
}

// --fork returns once the background server is ready; --bind_ip_all starts and serves; -vv
// sets logLevel 2; SIGUSR1 rotates the log file; SIGTERM stops the forked server.
func TestBinaryForkBindIPAllAndSIGUSR1(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongod"), "humongod")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log", "mongod.log")
	pidPath := filepath.Join(dir, "mongod.pid")
	cmd := exec.Command(bin, "--fork", "--logpath", logPath, "--pidfilepath", pidPath, "--dbpath", filepath.Join(dir, "db"),
		"--port", "0", "--bind_ip_all", "-vv", "--nounixsocket")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child process started successfully, parent exiting") {
		t.Fatalf("--fork parent: %v\n%s", err, out)
	}
	pidData, err := os.ReadFile(pidPath)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidData)))
	if !strings.Contains(string(out), fmt.Sprintf("forked process: %d", pid)) {
		t.Errorf("parent output %s, pid file %d", out, pid)
	}
	child, _ := os.FindProcess(pid)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = child.Signal(syscall.SIGKILL)
		}
	})
	port := waitLogPort(t, logPath)
	cl := ping(t, "127.0.0.1:"+strconv.Itoa(port))
	r, err := cl.Database("admin").RunCommand(context.Background(), bson.D{{Key: "getParameter", Value: 1}, {Key: "logLevel", Value: 1}}).Raw()
	if err != nil || r.Lookup("logLevel").AsInt64() != 2 {
		t.Errorf("logLevel after -vv: %v %v", r, err)
	}
	if data, _ := os.ReadFile(logPath); !strings.Contains(string(data), `"option":"--nounixsocket"`) {
		t.Errorf("no warning for --nounixsocket")
	}

	if err := child.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var rotated []string
	for time.Now().Before(deadline) {
		if rotated, _ = filepath.Glob(logPath + ".20*"); len(rotated) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(rotated) != 1 {
		t.Fatalf("SIGUSR1 did not rotate the log: %v", rotated)
	}
	ping(t, "127.0.0.1:"+strconv.Itoa(port))

	if err := child.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(logPath); strings.Contains(string(data), `"msg":"Shutting down","attr":{"exitCode":0}`) {
			stopped = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !stopped {
		data, _ := os.ReadFile(logPath)
		t.Fatalf("forked server did not shut down cleanly:\n%s", data)
	}
	// The new file holds what was logged after the rotation, starting with the build and the
	// options; the old one what came before.
	if cur, _ := os.ReadFile(logPath); !strings.Contains(string(cur), "Options set by command line") ||
		strings.Contains(string(cur), "Waiting for connections") {
		t.Errorf("new log file:\n%s", cur)
	}
	old, _ := os.ReadFile(rotated[0])
	if !strings.Contains(string(old), "Waiting for connections") || !strings.Contains(string(old), "Log rotation initiated") {
		t.Errorf("rotated file:\n%s", old)
	}
}

// A forked child that fails to start makes the parent fail with its exit code.
func TestBinaryForkChildFails(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongod"), "humongod")
	dir := t.TempDir()
	cmd := exec.Command(bin, "--fork", "--logpath", filepath.Join(dir, "mongod.log"), "--dbpath", filepath.Join(dir, "db"),
		"--port", "0", "--storageEngine", "mmapv1")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != process.ExitUncaught || !strings.Contains(string(out), "ERROR: child process failed, exited with 100") {
		t.Errorf("parent: %v\n%s", err, out)
	}
}

func TestClusterRoleOptions(t *testing.T) {
	dir := t.TempDir()
	yaml := func(body string) string {
		p := filepath.Join(dir, strconv.Itoa(len(body))+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		args       []string
		role       string
		port       int
		err        string
		parsedRole string
	}{
		{args: []string{"--configsvr", "--replSet", "cfg"}, role: "configsvr", port: 27019},
		{args: []string{"--shardsvr", "--replSet", "rs0"}, role: "shardsvr", port: 27018},
		{args: []string{"--shardsvr", "--replSet", "rs0", "--port", "27300"}, role: "shardsvr", port: 27300},
		{args: []string{"--replSet", "rs0"}, role: "", port: 27017},
		{args: []string{"--config", yaml("sharding:\n  clusterRole: configsvr\nreplication:\n  replSetName: cfg\n")}, role: "configsvr", port: 27019},
		{args: []string{"--config", yaml("net:\n  port: 27400\nsharding:\n  clusterRole: shardsvr\nreplication:\n  replSetName: rs\n")}, role: "shardsvr", port: 27400},
		// The flag overrides the file's role.
		{args: []string{"--config", yaml("sharding:\n    clusterRole: shardsvr\nreplication:\n  replSetName: cfg\n"), "--configsvr"}, role: "configsvr", port: 27019},
		{args: []string{"--configsvr", "--shardsvr", "--replSet", "x"}, err: "BadValue: shardsvr is not allowed when configsvr is specified"},
		{args: []string{"--configsvr"}, err: "BadValue: Cannot start a configsvr as a standalone server. Please use the option --replSet to start the node as a replica set."},
		{args: []string{"--shardsvr", "--port", "1"}, err: "BadValue: Cannot start a shardsvr as a standalone server. Please use the option --replSet to start the node as a replica set."},
		{args: []string{"--config", yaml("sharding:\n  clusterRole: router\n")}, err: "BadValue: sharding.clusterRole must be a string of the format: (configsvr/shardsvr)"},
	} {
		o, err := parseOptions(tc.args, io.Discard)
		if tc.err != "" {
			if !errors.Is(err, process.ErrBadOptions) || !strings.HasSuffix(err.Error(), ": "+tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if o.ClusterRole != tc.role || o.Port != tc.port {
			t.Errorf("%q: role %q port %d, want %q %d", tc.args, o.ClusterRole, o.Port, tc.role, tc.port)
		}
		got, _ := o.parsed().Lookup("sharding", "clusterRole").StringValueOK()
		if got != tc.role {
			t.Errorf("%q: parsed sharding.clusterRole %q, want %q", tc.args, got, tc.role)
		}
	}
}
