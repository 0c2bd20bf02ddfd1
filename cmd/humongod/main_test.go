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
	"humongo/internal/process"
)

func TestBinaryPingSigtermAndDBPathLock(t *testing.T) {
	bin := filepath.Join(cluster.MustBuild(t, "humongod"), "humongod")
	p := cluster.StartProcess(t, cluster.ProcessOptions{Name: "humongod", Binary: bin, Dir: t.TempDir()})
	dbpath := p.DBPath() // created by humongod

	cl, err := mongo.Connect(options.Client().
		ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", p.Port())).
		SetServerSelectionTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	opts, err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "getCmdLineOpts", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := opts.Lookup("parsed", "storage", "dbPath").StringValueOK(); got != dbpath {
		t.Errorf("parsed.storage.dbPath = %q", got)
	}
	_ = cl.Disconnect(ctx)

	// A second server on the same dbpath fails with DBPathInUse and exit code 100.
	second := exec.Command(bin, "--port", "0", "--dbpath", dbpath)
	out, _ := second.CombinedOutput()
	if second.ProcessState.ExitCode() != 100 || !strings.Contains(string(out), "DBPathInUse") {
		t.Errorf("second server: exit %d\n%s", second.ProcessState.ExitCode(), out)
	}

	// Stop sends SIGTERM and fails unless the exit code is 0.
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	// The lock is released and emptied on clean shutdown.
	if data, err := os.ReadFile(filepath.Join(dbpath, lockFileName)); err != nil || len(data) != 0 {
		t.Errorf("lock file after shutdown: %q, %v", data, err)
	}
}

func TestOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "humongod.yaml")
	yaml := `
net:
  port: 30001
  bindIp: 127.0.0.1,::1
storage:
  dbPath: /from/config
systemLog:
  destination: file
  path: /tmp/x.log
  quiet: true
setParameter:
  cursorTimeoutMillis: 5000
operationProfiling:
  slowOpThresholdMs: 250
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"--config", cfg, "--port", "30002", "--setParameter", "cursorTimeoutMillis=7000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 30002 || o.DBPath != "/from/config" || len(o.BindIPs) != 2 || !o.Quiet || o.SlowMS != 250 || o.LogPath != "/tmp/x.log" {
		t.Errorf("options: %+v", o)
	}
	// The command-line setParameter comes last, so it wins.
	if last := o.SetParameters[len(o.SetParameters)-1]; last != [2]string{"cursorTimeoutMillis", "7000"} {
		t.Errorf("setParameters: %v", o.SetParameters)
	}
	d, err := parseOptions(nil, io.Discard)
	if err != nil || d.Port != 27017 || d.BindIPs[0] != "127.0.0.1" || d.DBPath != "./data" {
		t.Errorf("defaults: %+v %v", d, err)
	}
	if err := os.WriteFile(cfg, []byte("net:\n  bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseOptions([]string{"--config", cfg}, io.Discard); !errors.Is(err, process.ErrBadOptions) {
		t.Errorf("unknown config key: %v", err)
	}
	if code := run([]string{"humongod", "--nope"}, io.Discard, io.Discard); code != process.ExitBadOptions {
		t.Errorf("bad flag exit %d", code)
	}
}
