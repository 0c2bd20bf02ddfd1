package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/storage"
	"humongo/internal/validate"
)

const (
	ns        = "crash.docs"
	writers   = 8
	envDir    = "HUMONGO_CRASH_CHILD_DIR"
	envRun    = "HUMONGO_CRASH_CHILD_RUN"
	envIters  = "HUMONGO_CRASH_ITERATIONS"
	padLength = 256
)

// openStack opens the engine, catalog and write path on dir, creating the collection and its
// secondary indexes on first use.
func openStack(ctx context.Context, dir string) (*storage.Engine, *catalog.Catalog, *index.Collection, error) {
	e, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open engine: %w", err)
	}
	cat, err := catalog.Open(ctx, e)
	if err != nil {
		e.Close()
		return nil, nil, nil, fmt.Errorf("open catalog: %w", err)
	}
	if _, ok := cat.Latest().ByNS(ns); !ok {
		ru := e.NewRecoveryUnit()
		err := storage.WriteConflictRetry(ctx, "create", func() error {
			w := ru.BeginUnitOfWork()
			defer w.End()
			if _, err := cat.CreateCollection(ru, ns, nil); err != nil {
				return err
			}
			return w.Commit()
		})
		ru.Close()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("create collection: %w", err)
		}
	}
	colls := index.NewCollections(e, cat)
	coll, err := colls.Get(ns)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open collection: %w", err)
	}
	for _, spec := range []bsoncore.Document{
		bsoncore.NewDocumentBuilder().AppendString("name", "run_1_w_1_seq_1").AppendBoolean("unique", true).
			AppendDocument("key", bsoncore.NewDocumentBuilder().AppendInt32("run", 1).AppendInt32("w", 1).AppendInt32("seq", 1).Build()).Build(),
		bsoncore.NewDocumentBuilder().AppendString("name", "tags_1").
			AppendDocument("key", bsoncore.NewDocumentBuilder().AppendInt32("tags", 1).Build()).Build(),
	} {
		name, _ := spec.Lookup("name").StringValueOK()
		if _, ok, err := coll.Index(name); err != nil {
			return nil, nil, nil, err
		} else if !ok {
			if _, _, err := index.Build(ctx, coll, spec, index.BuildOptions{TempDir: dir}); err != nil {
				return nil, nil, nil, fmt.Errorf("build %s: %w", name, err)
			}
		}
	}
	return e, cat, coll, nil
}

// TestCrashChild is the writer process; it runs only when started by TestKillNineRecovery.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(envDir)
	if dir == "" {
		t.Skip("child process of TestKillNineRecovery")
	}
	run := os.Getenv(envRun)
	ctx := context.Background()
	e, _, coll, err := openStack(ctx, dir)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
	_ = e
	var out sync.Mutex
	fmt.Println("ready")
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ru := e.NewRecoveryUnit()
			defer ru.Close()
			pad := strings.Repeat("x", padLength)
			for seq := 0; ; seq++ {
				id := fmt.Sprintf("%s-%d-%d", run, w, seq)
				doc := bsoncore.NewDocumentBuilder().AppendString("_id", id).AppendInt32("w", int32(w)).
					AppendString("run", run).AppendInt32("seq", int32(seq)).
					AppendArray("tags", bsoncore.NewArrayBuilder().AppendString(run).AppendInt32(int32(seq%7)).Build()).
					AppendString("pad", pad).Build()
				counterID := fmt.Sprintf("counter-%d", w)
				err := coll.Write(ctx, ru, func() error {
					if _, err := coll.InsertDocument(ru, doc); err != nil {
						return err
					}
					// Every unit also updates (or creates) the writer's counter document, so
					// updates and index maintenance are covered too.
					idv := bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, counterID)}
					counter := bsoncore.NewDocumentBuilder().AppendString("_id", counterID).
						AppendString("run", "counter").AppendInt32("w", int32(w)).AppendInt32("seq", 0).
						AppendString("last", id).AppendInt64("n", int64(seq)).Build()
					rid, old, found, err := coll.FindByID(ru, idv)
					if err != nil {
						return err
					}
					if !found {
						_, err = coll.InsertDocument(ru, counter)
						return err
					}
					return coll.UpdateDocument(ru, rid, old, counter)
				})
				if err != nil {
					out.Lock()
					fmt.Printf("error %v\n", err)
					out.Unlock()
					return
				}
				if err := e.WaitUntilDurable(ctx); err != nil {
					return
				}
				out.Lock()
				fmt.Printf("ack %s %d\n", id, seq)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(4)
}

type ack struct {
	id  string
	seq int64
}

func TestKillNineRecovery(t *testing.T) {
	if os.Getenv(envDir) != "" {
		t.Skip("inside the child")
	}
	iterations := 20
	if testing.Short() {
		iterations = 5
	}
	if s := os.Getenv(envIters); s != "" {
		iterations, _ = strconv.Atoi(s)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (kill points are random; the seed reproduces them)", seed)
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var acked []ack
	for i := 0; i < iterations; i++ {
		run := fmt.Sprintf("r%d", i)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envDir+"="+dir, envRun+"="+run)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		killAfter := time.Duration(20+r.IntN(600)) * time.Millisecond
		var timer <-chan time.Time
		runAcks := 0
	read:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					break read
				}
				switch f := strings.Fields(line); {
				case len(f) == 3 && f[0] == "ack":
					seq, _ := strconv.ParseInt(f[2], 10, 64)
					acked = append(acked, ack{f[1], seq})
					runAcks++
				case len(f) >= 1 && f[0] == "ready":
					timer = time.After(killAfter)
				case len(f) >= 1 && f[0] == "error":
					t.Fatalf("run %s: child reported: %s", run, line)
				}
			case <-timer:
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatalf("kill: %v", err)
				}
				timer = nil
			case <-ctx.Done():
				t.Fatal("timed out")
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("run %s: child did not die of SIGKILL: %v", run, err)
		}
		lastSeq := map[int]int64{} // writer -> highest seq acknowledged in this run
		for _, a := range acked[len(acked)-runAcks:] {
			w, _ := strconv.Atoi(strings.Split(a.id, "-")[1])
			lastSeq[w] = max(lastSeq[w], a.seq)
		}
		t.Logf("run %s: killed after %v, %d writes acknowledged (%d in all)", run, killAfter, runAcks, len(acked))
		verify(t, ctx, dir, acked, run, lastSeq)
	}
}

// verify reopens dir after a crash, validates the collection and checks every acknowledged
// write is there.
func verify(t *testing.T, ctx context.Context, dir string, acked []ack, run string, lastSeq map[int]int64) {
	t.Helper()
	e, cat, coll, err := openStack(ctx, dir)
	if err != nil {
		t.Fatalf("after %s: reopen: %v", run, err)
	}
	defer func() {
		cat.Close()
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	res, err := validate.Validate(ctx, e, cat, ns, true)
	if err != nil {
		t.Fatalf("after %s: validate: %v", run, err)
	}
	if !res.Valid {
		t.Fatalf("after %s: collection invalid: errors %v", run, res.Errors)
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	for _, a := range acked {
		idv := bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, a.id)}
		_, _, found, err := coll.FindByID(ru, idv)
		if err != nil {
			t.Fatalf("after %s: find %s: %v", run, a.id, err)
		}
		if !found {
			t.Fatalf("after %s: acknowledged write %s lost", run, a.id)
		}
	}
	for w, seq := range lastSeq {
		idv := bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, fmt.Sprintf("counter-%d", w))}
		_, doc, found, err := coll.FindByID(ru, idv)
		if err != nil || !found {
			t.Fatalf("after %s: counter %d missing (%v)", run, w, err)
		}
		// The counter is updated in the same unit as each insert, so it must reflect at least
		// the writer's last acknowledged unit of this run.
		last, _ := doc.Lookup("last").StringValueOK()
		n, _ := doc.Lookup("n").Int64OK()
		if !strings.HasPrefix(last, run+"-") || n < seq {
			t.Fatalf("after %s: counter %d is {last: %q, n: %d}, but seq %d was acknowledged", run, w, last, n, seq)
		}
	}
}
