package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchMoveChunks: `humongo bench a --move-chunks` against `humongo up --shards 2` moves
// chunks of the benchmark collection through the router while the workload runs, and every
// workload operation succeeds; the report counts the moves. A target that is not a router,
// and --move-chunks with --drop, are refused.
func TestBenchMoveChunks(t *testing.T) {
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
	bench := func(args ...string) (string, string, int) {
		t.Helper()
		return humongo(t, append([]string{"bench"}, append(args, "--progress", "0")...)...)
	}
	// Range: one chunk, which the mover splits first.
	if out, errs, code := bench("load", "--uri", router, "--shard-key", "range", "--drop", "--records", "2000", "--threads", "4"); code != 0 {
		t.Fatalf("bench load: exit %d\n%s%s", code, out, errs)
	}
	// A move in flight when the workload ends is waited for, so at least one is done
	// however slow the machine is.
	out, errs, code = bench("a", "--uri", router, "--records", "2000", "--ops", "100000000", "--duration", "3s",
		"--threads", "2", "--move-chunks", "200ms", "--json")
	if code != 0 {
		t.Fatalf("bench a --move-chunks: exit %d\n%s%s", code, out, errs)
	}
	var rep struct {
		Phases []struct {
			Phase      string
			Operations uint64
			Errors     uint64
		}
		Moves *moveReport
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.Moves == nil || rep.Moves.Done < 1 || rep.Moves.MaxMillis <= 0 {
		t.Errorf("moves %+v, want at least one done with its duration\n%s", rep.Moves, out)
	}
	if len(rep.Phases) != 1 || rep.Phases[0].Operations == 0 || rep.Phases[0].Errors != 0 {
		t.Errorf("phases %+v, want one with operations and no errors", rep.Phases)
	}

	direct := fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ports[0])
	out, errs, code = bench("a", "--uri", direct, "--records", "10", "--ops", "10", "--move-chunks", "1s")
	if code == 0 || !strings.Contains(errs, "must be a router") {
		t.Errorf("bench --move-chunks against a shard: exit %d, want a refusal\n%s%s", code, out, errs)
	}
	out, errs, code = bench("a", "--uri", router, "--drop", "--records", "10", "--move-chunks", "1s")
	if code == 0 || !strings.Contains(errs, "load the records first") {
		t.Errorf("bench --move-chunks --drop: exit %d, want a refusal\n%s%s", code, out, errs)
	}
}

// TestParseMoveChunks: --move-chunks takes a duration and is refused where no workload runs
// on loaded records (a load, ping, or --drop, which loads during the run).
func TestParseMoveChunks(t *testing.T) {
	o, err := parseBenchFlags([]string{"a", "--move-chunks", "3s"}, &bytes.Buffer{})
	if err != nil || o.moveChunks != 3*time.Second {
		t.Fatalf("--move-chunks 3s: %v %+v", err, o)
	}
	for _, args := range [][]string{{"a", "--move-chunks", "-1s"}, {"a", "--drop", "--move-chunks", "1s"},
		{"load", "--move-chunks", "1s"}, {"ping", "--move-chunks", "1s"}} {
		if _, err := parseBenchFlags(args, &bytes.Buffer{}); !errors.As(err, new(usageError)) {
			t.Errorf("%q: error %v, want a usage error", args, err)
		}
	}
}
