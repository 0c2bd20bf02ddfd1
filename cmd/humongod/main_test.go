package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// buildBinary runs `go build ./cmd/humongod` into a temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "humongod")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is a running humongod whose stdout log is scanned for the listening port.
type proc struct {
	cmd  *exec.Cmd
	port int
	log  chan string // remaining log lines
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: make(chan string, 1024)}
	portc := make(chan int, 1)
	go func() {
		defer close(p.log)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			var rec struct {
				Msg  string `json:"msg"`
				Attr struct {
					Port int `json:"port"`
				} `json:"attr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "Waiting for connections" {
				portc <- rec.Attr.Port
			}
			select {
			case p.log <- line:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	select {
	case p.port = <-portc:
	case <-time.After(20 * time.Second):
		t.Fatal("no 'Waiting for connections' line")
	}
	return p
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("process did not exit")
		return -1
	}
}

func TestBinaryPingSigtermAndDBPathLock(t *testing.T) {
	bin := buildBinary(t)
	dbpath := filepath.Join(t.TempDir(), "db") // created by humongod
	p := startProc(t, bin, "--port", "0", "--dbpath", dbpath)

	cl, err := mongo.Connect(options.Client().
		ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", p.port)).
		SetServerSelectionTimeout(5 * time.Second))
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

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, p.cmd); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
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
	if _, err := parseOptions([]string{"--config", cfg}, io.Discard); !errors.Is(err, errBadOptions) {
		t.Errorf("unknown config key: %v", err)
	}
	if code := run([]string{"humongod", "--nope"}, io.Discard, io.Discard); code != exitBadOptions {
		t.Errorf("bad flag exit %d", code)
	}
}
