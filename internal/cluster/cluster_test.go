package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/cluster/proxy"
)

func ping(cl *mongo.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}

func mustPing(t *testing.T, cl *mongo.Client) {
	t.Helper()
	if err := ping(cl, 15*time.Second); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestBuildBinaries(t *testing.T) {
	ctx := ctxT(t, buildTimeout)
	dir, err := BuildBinaries(ctx, "humongod")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "humongod")); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("binary: %v %v", st, err)
	}
	start := time.Now()
	dir2, err := BuildBinaries(ctx, "humongod")
	if err != nil || dir2 != dir {
		t.Fatalf("second build: %q, %v (first %q)", dir2, err, dir)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("second BuildBinaries took %v; should be cached in-process", d)
	}
	if _, err := BuildBinaries(ctx, "no-such-command"); err == nil {
		t.Error("building a missing command succeeded")
	}
	if _, err := BuildBinaries(ctx, "../escape"); err == nil {
		t.Error("a path as binary name was accepted")
	}
}

func TestStandaloneKillRestart(t *testing.T) {
	n, cl := StartStandalone(t, Options{})
	mustPing(t, cl)
	port, pid := n.Port(), n.PID()
	if port == 0 || pid == 0 {
		t.Fatalf("port %d pid %d", port, pid)
	}
	if _, err := os.Stat(filepath.Join(n.DBPath(), "mongod.lock")); err != nil {
		t.Errorf("dbpath not used: %v", err)
	}

	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() || alive(pid) {
		t.Fatal("process alive after Kill")
	}
	if st := n.ExitState(); st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("exit state %v", st)
	}
	if err := ping(cl, 500*time.Millisecond); err == nil {
		t.Fatal("ping succeeded with the server killed")
	}

	if err := n.Restart(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n.Port() != port || n.PID() == pid {
		t.Fatalf("after restart: port %d (was %d), pid %d (was %d)", n.Port(), port, n.PID(), pid)
	}
	if err := n.WaitReady(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustPing(t, cl) // the same client reconnects to the same address
	log, _ := os.ReadFile(n.LogPath())
	if c := strings.Count(string(log), "=== cluster harness: start #"); c != 2 {
		t.Errorf("log has %d start markers, want 2", c)
	}
	if c := strings.Count(string(log), "Waiting for connections"); c != 2 {
		t.Errorf("log has %d 'Waiting for connections', want 2", c)
	}
}

func TestPauseResume(t *testing.T) {
	n, cl := StartStandalone(t, Options{})
	mustPing(t, cl)
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if !n.Paused() {
		t.Fatal("Paused() false after Pause")
	}
	start := time.Now()
	if err := ping(cl, 500*time.Millisecond); err == nil {
		t.Fatal("ping answered by a paused server")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ping against a paused server took %v; timeouts must bound it", d)
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	mustPing(t, cl)
	t.Logf("first ping after resume took %v", time.Since(start))
	// Stop works on a paused process too (SIGCONT before SIGTERM).
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(ctxT(t, 20*time.Second)); err != nil {
		t.Fatalf("Stop of a paused process: %v", err)
	}
}

func TestStopIsCleanAndRestartable(t *testing.T) {
	n, cl := StartStandalone(t, Options{})
	mustPing(t, cl)
	if err := n.Stop(ctxT(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := n.ExitState(); st == nil || st.ExitCode() != 0 {
		t.Fatalf("exit state after SIGTERM: %v", st)
	}
	if err := n.Stop(ctxT(t, time.Second)); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := n.Pause(); err == nil {
		t.Fatal("Pause of a stopped process succeeded")
	}
	if err := n.Restart(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustPing(t, cl)
	// Restart of a running process stops it first.
	pid := n.PID()
	if err := n.Restart(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n.PID() == pid || alive(pid) {
		t.Fatal("Restart did not replace the running process")
	}
	mustPing(t, cl)
}

func TestStartFailureReportsExitAndLog(t *testing.T) {
	bin := MustBuild(t, "humongod")
	p, err := NewProcess(ProcessOptions{Name: "bad", Binary: filepath.Join(bin, "humongod"), Dir: t.TempDir(),
		Args: []string{"--no-such-flag"}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(ctxT(t, 30*time.Second))
	var se *StartError
	if !errors.As(err, &se) || se.ExitCode() != 2 {
		t.Fatalf("want a StartError with exit code 2 (bad options), got %v", err)
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not include the log tail: %v", err)
	}

	// A second process on the same dbpath fails with DBPathInUse (exit 100) while the first
	// runs: the harness surfaces the server's own diagnosis.
	dir := t.TempDir()
	first := StartProcess(t, ProcessOptions{Name: "a", Binary: filepath.Join(bin, "humongod"), Dir: dir})
	second, err := NewProcess(ProcessOptions{Name: "b", Binary: filepath.Join(bin, "humongod"), Dir: dir,
		Args: []string{"--dbpath", first.DBPath()}})
	if err != nil {
		t.Fatal(err)
	}
	err = second.Start(ctxT(t, 30*time.Second))
	if !errors.As(err, &se) || se.ExitCode() != 100 || !strings.Contains(err.Error(), "DBPathInUse") {
		t.Fatalf("want DBPathInUse exit 100, got %v", err)
	}
}

// fakeFailTB reports the test as failed and captures logs, to check the failure diagnostics
// without failing the real test.
type fakeFailTB struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (f *fakeFailTB) Failed() bool { return true }
func (f *fakeFailTB) Logf(format string, args ...any) {
	f.mu.Lock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func TestCleanupKillsAndPrintsLogs(t *testing.T) {
	bin := MustBuild(t, "humongod")
	var pid int
	fake := &fakeFailTB{}
	t.Run("inner", func(t *testing.T) {
		fake.TB = t
		p := StartProcess(fake, ProcessOptions{Name: "leaky", Binary: filepath.Join(bin, "humongod"), Dir: t.TempDir()})
		pid = p.PID()
		if err := p.Pause(); err != nil { // even a stopped process must be killed
			t.Fatal(err)
		}
	})
	if pid == 0 || alive(pid) {
		t.Fatalf("pid %d still alive after its test ended", pid)
	}
	all := strings.Join(fake.logs, "\n")
	if !strings.Contains(all, "last 50 lines of leaky") || !strings.Contains(all, "Waiting for connections") {
		t.Fatalf("failure diagnostics missing the log tail:\n%s", all)
	}
}

func TestClientProxyPartition(t *testing.T) {
	d := Start(t, Topology{}, Options{Proxy: true})
	n := d.Nodes[0]
	pr := d.ClientProxy(n)
	if pr == nil || !strings.Contains(d.URI, pr.Addr()) {
		t.Fatalf("client not routed through the proxy: %s", d.URI)
	}
	mustPing(t, d.Client)

	pr.SetBlackhole(proxy.Both, true)
	if err := ping(d.Client, 500*time.Millisecond); err == nil {
		t.Fatal("ping crossed a black-holed link")
	}
	// The server itself is fine: a direct connection works.
	if err := n.WaitReady(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	pr.Heal()
	mustPing(t, d.Client)

	pr.SetDelay(150 * time.Millisecond)
	start := time.Now()
	mustPing(t, d.Client)
	if rtt := time.Since(start); rtt < 300*time.Millisecond {
		t.Errorf("ping took %v through a 150ms-each-way link", rtt)
	}
	pr.SetDelay(0)

	if pr.DropConnections() == 0 {
		t.Error("no client connections to drop")
	}
	// The first command on a pooled connection that was cut may fail (the driver does not
	// retry commands run with RunCommand): with a network error, or, when the monitor noticed
	// the cut first, with the pool-cleared error that follows it. The next one reconnects.
	if err := ping(d.Client, 5*time.Second); err != nil {
		t.Logf("first ping after a drop: %v", err)
	}
	mustPing(t, d.Client)
}

func TestUnsupportedTopology(t *testing.T) {
	if (Topology{Kind: ReplicaSet, Name: "rs0", Members: 3}).String() != "replica set rs0 of 3" {
		t.Error("Topology.String")
	}
}
