package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
)

// Bounds on every wait, so a wedged server fails a test instead of hanging CI.
const (
	buildTimeout = 5 * time.Minute
	startTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	opTimeout    = 10 * time.Second
)

var (
	// workDir holds the binary, the shared server's files and nothing else; TestMain removes it.
	workDir string
	binPath string

	sharedOnce   sync.Once
	sharedSrv    *server
	sharedClient *mongo.Client
	sharedErr    error
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	var err error
	workDir, err = os.MkdirTemp("", "humongo-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	start := time.Now()
	if binPath, err = buildHumongod(workDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "built humongod in %v\n", time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	defer cluster.RemoveKeyfile() // the harness's, for the processes it started
	if code != 0 && sharedSrv != nil {
		fmt.Fprintf(os.Stderr, "--- shared humongod log (%s) tail ---\n%s\n", sharedSrv.logPath, sharedSrv.tail(30))
	}
	if sharedClient != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = sharedClient.Disconnect(ctx)
		cancel()
	}
	if sharedSrv != nil {
		if err := sharedSrv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "shared humongod: %v\n%s\n", err, sharedSrv.tail(30))
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// buildHumongod builds ./cmd/humongod of the enclosing module into dir.
func buildHumongod(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the humongo module")
	}
	bin := filepath.Join(dir, "humongod")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/humongod")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/humongod: %w\n%s", err, out)
	}
	return bin, nil
}

// server is one humongod child process.
type server struct {
	dbPath, logPath string
	port            int
	cmd             *exec.Cmd
	exited          chan struct{} // closed when the process has exited and its output is drained
}

// startServer starts humongod on an ephemeral port with dbPath, appending its output to
// logPath, and returns once it logged "Waiting for connections".
func startServer(dbPath, logPath string, args ...string) (*server, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd := exec.Command(binPath, append([]string{"--port", "0", "--bind_ip", "127.0.0.1", "--dbpath", dbPath}, args...)...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		return nil, fmt.Errorf("start humongod: %w", err)
	}
	pw.Close() // the child holds the write end; EOF comes when it exits
	s := &server{dbPath: dbPath, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	ready := make(chan int, 1)
	drained := make(chan struct{})
	go func() { // owns the read end until EOF (the child exited)
		defer close(drained)
		copyLog(pr, logf, ready)
	}()
	go func() { // owns the child: reaps it and announces the exit
		_ = cmd.Wait()
		<-drained
		pr.Close()
		logf.Close()
		close(s.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case s.port = <-ready:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("humongod exited during startup (%v):\n%s", cmd.ProcessState, s.tail(30))
	case <-timer.C:
		s.kill()
		return nil, fmt.Errorf("humongod: no \"Waiting for connections\" within %v:\n%s", startTimeout, s.tail(30))
	}
}

// copyLog copies the server's output to w and sends the port of its first
// "Waiting for connections" log line (logv2 JSON: {"msg": ..., "attr": {"port": N}}).
func copyLog(r io.Reader, w io.Writer, ready chan<- int) {
	br := bufio.NewReaderSize(r, 1<<20)
	found := false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = w.Write(line)
			if !found && bytes.Contains(line, []byte("Waiting for connections")) {
				var rec struct {
					Msg  string `json:"msg"`
					Attr struct {
						Port int `json:"port"`
					} `json:"attr"`
				}
				if json.Unmarshal(line, &rec) == nil && rec.Msg == "Waiting for connections" && rec.Attr.Port > 0 {
					found = true
					ready <- rec.Attr.Port
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *server) uri() string {
	return fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.port)
}

// stop shuts the server down cleanly with SIGTERM, as an operator would, and reports a
// non-zero exit; after stopTimeout it falls back to SIGKILL.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return exitErr(s.cmd.ProcessState)
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return exitErr(s.cmd.ProcessState)
	case <-time.After(stopTimeout):
		s.kill()
		return fmt.Errorf("humongod did not exit within %v of SIGTERM; killed", stopTimeout)
	}
}

func exitErr(ps *os.ProcessState) error {
	if ps != nil && !ps.Success() {
		return fmt.Errorf("humongod exited with %v", ps)
	}
	return nil
}

// kill sends SIGKILL and waits (bounded) for the process to be reaped.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
	}
}

// tail returns the last n lines of the server's log.
func (s *server) tail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// newServer starts a humongod owned by the test, on dbPath (a fresh one when empty) with extra
// command-line args; it is
// killed when the test ends, and its log tail printed if the test failed.
func newServer(t testing.TB, dbPath string, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	if dbPath == "" {
		dbPath = filepath.Join(dir, "db")
	}
	s, err := startServer(dbPath, filepath.Join(dir, "humongod.log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("--- humongod log tail ---\n%s", s.tail(40))
		}
	})
	return s
}

// connect returns a client for uri, disconnected when the test ends. Retries are off so each
// test sees exactly the server's answer.
func connect(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(clientOptions(uri))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	return cl
}

func clientOptions(uri string) *options.ClientOptions {
	return options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second).
		SetRetryReads(false).SetRetryWrites(false)
}

// shared returns a client of the humongod shared by the package's tests (started on first
// use). Each test works in its own database (testDB), so tests do not see each other.
func shared(t testing.TB) *mongo.Client {
	t.Helper()
	sharedOnce.Do(func() {
		dir := filepath.Join(workDir, "shared")
		if sharedErr = os.MkdirAll(dir, 0o755); sharedErr != nil {
			return
		}
		sharedSrv, sharedErr = startServer(filepath.Join(dir, "db"), filepath.Join(dir, "humongod.log"))
		if sharedErr != nil {
			return
		}
		sharedClient, sharedErr = mongo.Connect(clientOptions(sharedSrv.uri()))
	})
	if sharedErr != nil {
		t.Fatalf("shared humongod: %v", sharedErr)
	}
	return sharedClient
}

// testDB returns a database named after the test on the shared server, dropped at the end.
func testDB(t testing.TB) *mongo.Database {
	t.Helper()
	cl := shared(t)
	name := "it_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, strings.TrimPrefix(t.Name(), "TestIntegration"))
	if len(name) > 60 {
		name = name[:60]
	}
	db := cl.Database(name)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_ = db.Drop(ctx) // a previous failed run of the same test
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = db.Drop(ctx)
	})
	return db
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// runRaw runs cmd on db and returns the reply or the error.
func runRaw(t testing.TB, db *mongo.Database, cmd bson.D) (bson.Raw, error) {
	t.Helper()
	ctx := ctxT(t)
	if len(cmd) > 0 && cmd[0].Key == "getMore" {
		// A context deadline makes the driver send maxTimeMS, which MongoDB refuses on a
		// getMore of a non-awaitData cursor: bound it with a timer instead.
		c, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(opTimeout, cancel)
		t.Cleanup(func() { stop.Stop(); cancel() })
		ctx = c
	}
	return db.RunCommand(ctx, cmd).Raw()
}

// run runs cmd on db and fails the test if it does not succeed.
func run(t testing.TB, db *mongo.Database, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := runRaw(t, db, cmd)
	// The driver turns writeErrors of an ok:1 reply into a WriteException; the reply is
	// still the command's answer, which the tests inspect.
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError == nil && len(r) > 0 {
		return r
	}
	if err != nil {
		t.Fatalf("%s on %s: %v", fmtDoc(cmd), db.Name(), err)
	}
	return r
}

// runErr runs cmd on db and fails the test unless it fails with code (and its codeName).
func runErr(t testing.TB, db *mongo.Database, cmd bson.D, code mongoerr.Code) mongo.CommandError {
	t.Helper()
	r, err := runRaw(t, db, cmd)
	return wantErr(t, fmtDoc(cmd), r, err, code)
}

func wantErr(t testing.TB, what string, reply bson.Raw, err error, code mongoerr.Code) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: want error %d %s, got reply %v err %v", what, code, code.Name(), reply, err)
	}
	if ce.Code != int32(code) || ce.Name != code.Name() {
		t.Fatalf("%s: want error %d %s, got %d %s: %s", what, code, code.Name(), ce.Code, ce.Name, ce.Message)
	}
	return ce
}

func fmtDoc(d any) string {
	b, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		return fmt.Sprint(d)
	}
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// keys returns the field names of a document in order.
func keys(t testing.TB, d bson.Raw) []string {
	t.Helper()
	els, err := d.Elements()
	if err != nil {
		t.Fatalf("bad reply %v: %v", d, err)
	}
	ks := make([]string, len(els))
	for i, e := range els {
		ks[i] = e.Key()
	}
	return ks
}

// wantKeys checks a reply's (or sub-document's) field names and their order exactly.
func wantKeys(t testing.TB, d bson.Raw, want ...string) {
	t.Helper()
	if got := keys(t, d); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fields %v, want %v in %s", got, want, d)
	}
}

// lookup finds a dotted path in d, failing the test when it is absent.
func lookup(t testing.TB, d bson.Raw, path string) bson.RawValue {
	t.Helper()
	v, err := d.LookupErr(strings.Split(path, ".")...)
	if err != nil {
		t.Fatalf("no %q in %s", path, d)
	}
	return v
}

// wantInt32 checks that path is an int32 (as MongoDB sends counts such as n) equal to want.
func wantInt32(t testing.TB, d bson.Raw, path string, want int32) {
	t.Helper()
	v := lookup(t, d, path)
	if v.Type != bson.TypeInt32 {
		t.Errorf("%s is %v %v, want int32 %d in %s", path, v.Type, v, want, d)
		return
	}
	if got := v.Int32(); got != want {
		t.Errorf("%s = %d, want %d in %s", path, got, want, d)
	}
}

// wantNum checks that path is a number (any BSON numeric type) equal to want.
func wantNum(t testing.TB, d bson.Raw, path string, want int64) {
	t.Helper()
	v := lookup(t, d, path)
	got, ok := v.AsInt64OK()
	if !ok {
		if f, okf := v.DoubleOK(); okf && f == float64(int64(f)) {
			got, ok = int64(f), true
		}
	}
	if !ok || got != want {
		t.Errorf("%s = %v, want %d in %s", path, v, want, d)
	}
}

// wantDocs checks that docs (compared as relaxed extended JSON) equal want in order.
func wantDocs(t testing.TB, what string, got []bson.Raw, want ...string) {
	t.Helper()
	gs := make([]string, len(got))
	for i, d := range got {
		gs[i] = canon(t, d)
	}
	ws := make([]string, len(want))
	for i, w := range want {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(w), false, &d); err != nil {
			t.Fatalf("bad want %s: %v", w, err)
		}
		ws[i] = canon(t, mustMarshal(t, d))
	}
	if strings.Join(gs, "\n") != strings.Join(ws, "\n") {
		t.Errorf("%s:\n got  %v\n want %v", what, gs, ws)
	}
}

func canon(t testing.TB, d bson.Raw) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		t.Fatalf("marshal %v: %v", d, err)
	}
	return string(b)
}

func mustMarshal(t testing.TB, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// array returns the documents of an array value.
func array(t testing.TB, v bson.RawValue) []bson.Raw {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("not an array: %v", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bson.Raw, 0, len(vals))
	for _, x := range vals {
		d, ok := x.DocumentOK()
		if !ok {
			t.Fatalf("array element is %v, not a document: %v", x.Type, v)
		}
		out = append(out, d)
	}
	return out
}

// insertN inserts documents {_id: i, a: i % mod} for i in [0, n) into coll.
func insertN(t testing.TB, coll *mongo.Collection, n, mod int) {
	t.Helper()
	docs := make([]any, n)
	for i := range n {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "a", Value: int32(i % mod)}}
	}
	if _, err := coll.InsertMany(ctxT(t), docs); err != nil {
		t.Fatalf("insertMany: %v", err)
	}
}

// d is shorthand for a bson.D built from key/value pairs.
func d(kv ...any) bson.D {
	if len(kv)%2 != 0 {
		panic("d: odd number of arguments")
	}
	out := make(bson.D, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return out
}

// a is shorthand for a bson.A (never nil: a() is an empty array, not null).
func a(vs ...any) bson.A { return append(bson.A{}, vs...) }

// countDocs counts with the count command. (The driver's CountDocuments runs an aggregation,
// which is not part of the CRUD command set these tests cover.)
func countDocs(t testing.TB, coll *mongo.Collection, filter any) (int64, error) {
	t.Helper()
	r, err := coll.Database().RunCommand(ctxT(t), d("count", coll.Name(), "query", filter)).Raw()
	if err != nil {
		return -1, err
	}
	n, ok := r.Lookup("n").AsInt64OK()
	if !ok {
		return -1, fmt.Errorf("count reply %s", r)
	}
	return n, nil
}

func optsSortID() *options.FindOptionsBuilder { return options.Find().SetSort(d("_id", 1)) }

// findAll runs a driver Find and returns every document.
func findAll(t testing.TB, coll *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) []bson.Raw {
	t.Helper()
	cur, err := coll.Find(ctxT(t), filter, opts...)
	if err != nil {
		t.Fatalf("find %s: %v", fmtDoc(filter), err)
	}
	var out []bson.Raw
	if err := cur.All(ctxT(t), &out); err != nil {
		t.Fatalf("find %s: %v", fmtDoc(filter), err)
	}
	return out
}
