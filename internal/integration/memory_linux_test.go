package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// procStatusKB returns the fields of /proc/<pid>/status named in keys, in kB.
func procStatusKB(t testing.TB, pid int, keys ...string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range keys {
			if v, ok := strings.CutPrefix(line, k+":"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				out[k] = n
			}
		}
	}
	return out
}

// TestIntegrationMemoryLargeInserts is issue 10's memory acceptance: four concurrent 47 MB
// insert messages (InsertMany batches the driver sends as one OP_MSG each) keep the server's
// peak RSS (VmHWM) below 1 GB, and afterwards RSS falls by at least half of the bytes the
// messages carried. (Not "under half the peak": what stays is mostly the storage engine's
// and the heap's steady state, 110–170 MB here, which sits around half of a 280 MB peak.)
func TestIntegrationMemoryLargeInserts(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 190 MB through a real server")
	}
	s := newServer(t, "", strings.Fields(os.Getenv("MEMTEST_ARGS"))...)
	cl := connect(t, s.uri())
	pid := s.cmd.Process.Pid
	base := procStatusKB(t, pid, "VmRSS", "VmHWM")

	const (
		clients  = 4
		docSize  = 100_000
		perBatch = 470 // 470 × 100 kB ≈ 47 MB: one message under the 48 MB limit
	)
	payload := make([]byte, docSize*perBatch+docSize)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(payload)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		docs := make([]any, perBatch)
		for i := range docs {
			off := (i*docSize + c*7919) % (len(payload) - docSize)
			docs[i] = bson.D{{Key: "_id", Value: c*perBatch + i}, {Key: "p", Value: bson.Binary{Data: payload[off : off+docSize]}}}
		}
		wg.Go(func() {
			if _, err := cl.Database("mem").Collection("c").InsertMany(ctx, docs); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The fast count: scanning 188 MB would fill the storage engine's block cache, memory
	// that is meant to stay.
	n, err := cl.Database("mem").Collection("c").EstimatedDocumentCount(ctx)
	if err != nil || n != clients*perBatch {
		t.Fatalf("count = %d, %v; want %d", n, err, clients*perBatch)
	}

	peak := procStatusKB(t, pid, "VmHWM")["VmHWM"]
	t.Logf("server RSS before %d MB; peak (VmHWM) %d MB", base["VmRSS"]>>10, peak>>10)
	if peak >= 1<<20 {
		t.Errorf("peak RSS %d MB, want < 1024 MB", peak>>10)
	}
	want := peak - clients*perBatch*docSize/2>>10 // kB
	deadline := time.Now().Add(60 * time.Second)
	for {
		rss := procStatusKB(t, pid, "VmRSS")["VmRSS"]
		if rss < want {
			t.Logf("RSS back to %d MB; Go heap: %s", rss>>10, heapReport(ctx, cl))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("RSS still %d MB a minute after the inserts (peak %d MB), want < %d MB; Go heap: %s",
				rss>>10, peak>>10, want>>10, heapReport(ctx, cl))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// heapReport is the server's own account of its Go heap (serverStatus's tcmalloc section),
// to tell the runtime's memory from the rest of the RSS when the test fails.
func heapReport(ctx context.Context, cl *mongo.Client) string {
	var st struct {
		Tcmalloc bson.Raw `bson:"tcmalloc"`
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st); err != nil {
		return err.Error()
	}
	return st.Tcmalloc.String()
}
