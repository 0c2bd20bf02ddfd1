package storage

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const killChildEnv = "HUMONGO_STORAGE_KILL_CHILD_DIR"

// TestKill9Child is the child half of TestKill9: it commits keys forever, printing each one
// after WaitUntilDurable returned, until the parent kills it.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("child process of TestKill9")
	}
	e, err := Open(Options{Dir: dir, Logger: quietLogger(), CacheSize: 8 << 20})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err := e.CreateIdent("t", IdentOptions{}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ru := e.NewRecoveryUnit()
	for i := 0; ; i++ {
		w := ru.BeginUnitOfWork()
		if err := ru.Put("t", []byte(fmt.Sprintf("k%08d", i)), []byte("v")); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if err := w.Commit(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		w.End()
		// Every fourth commit is acknowledged as durable; the others may be lost.
		if i%4 == 0 {
			if err := e.WaitUntilDurable(context.Background()); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println("acked", i)
		}
	}
}

// TestKill9 kills a writing child process with SIGKILL and checks that every write it
// acknowledged as durable is there after reopening the directory.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	sc := bufio.NewScanner(out)
	lastAcked := -1
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() && lastAcked < 400 && time.Now().Before(deadline) {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "acked "); ok {
			lastAcked, _ = strconv.Atoi(n)
		} else if strings.HasPrefix(line, "error") {
			t.Fatalf("child: %s", line)
		}
	}
	must(t, cmd.Process.Kill())
	_ = cmd.Wait()
	if lastAcked < 0 {
		t.Fatal("child acknowledged nothing")
	}

	e, err := Open(Options{Dir: dir, Logger: quietLogger(), CacheSize: 8 << 20})
	must(t, err)
	defer e.Close()
	if e.CleanShutdownLast() {
		t.Fatal("kill -9 not detected as unclean")
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	for i := 0; i <= lastAcked; i++ {
		if _, ok, err := ru.Get("t", []byte(fmt.Sprintf("k%08d", i))); err != nil || !ok {
			t.Fatalf("acknowledged write %d of %d lost (err %v)", i, lastAcked, err)
		}
	}
	// The child never called AdjustCounts, so the counts come from the recomputation scan.
	if r, _ := e.Counts("t"); r < int64(lastAcked+1) {
		t.Fatalf("recomputed count %d < %d acknowledged", r, lastAcked+1)
	}
	t.Logf("%d writes acknowledged before kill -9, all present", lastAcked+1)
}
