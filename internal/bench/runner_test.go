package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memStore is an in-memory Store. It exists to test the generators and the runner (which keys
// are chosen, how operations are mixed, counted and stopped), not any database.
type memStore struct {
	mu     sync.Mutex
	docs   map[string][][]byte
	sorted []string // keys in order, for Scan

	reads         map[string]int
	balances      map[string]int64 // Transfer's "balance" field; absent is 0
	transfers     int
	pings, drops  atomic.Int64
	scanned       atomic.Int64
	failUpdates   bool
	onOp          func(ctx context.Context) error // called before every operation if set
	insertedOrder []string
}

func newMemStore() *memStore {
	return &memStore{docs: map[string][][]byte{}, reads: map[string]int{}, balances: map[string]int64{}}
}

func (m *memStore) hook(ctx context.Context) error {
	if m.onOp != nil {
		return m.onOp(ctx)
	}
	return nil
}

func (m *memStore) Read(ctx context.Context, key string) error {
	if err := m.hook(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.docs[key]; !ok {
		return ErrNotFound
	}
	m.reads[key]++
	return nil
}

func (m *memStore) Update(ctx context.Context, key, field string, value []byte) error {
	if err := m.hook(ctx); err != nil {
		return err
	}
	if m.failUpdates {
		return errors.New("update refused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.docs[key]
	if !ok {
		return ErrNotFound
	}
	var i int
	if _, err := fmtSscanField(field, &i); err != nil || i >= len(d) {
		return errors.New("bad field " + field)
	}
	d[i] = append(d[i][:0], value...)
	return nil
}

// fmtSscanField parses "field<i>".
func fmtSscanField(f string, i *int) (int, error) {
	if !strings.HasPrefix(f, "field") {
		return 0, errors.New("no field prefix")
	}
	n := 0
	for _, c := range f[len("field"):] {
		if c < '0' || c > '9' {
			return 0, errors.New("bad digit")
		}
		n = n*10 + int(c-'0')
	}
	*i = n
	return 1, nil
}

func (m *memStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	if err := m.hook(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.docs[key]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicate, key)
	}
	cp := make([][]byte, len(fields))
	for i, f := range fields {
		cp[i] = append([]byte(nil), f...)
	}
	m.docs[key] = cp
	i := sort.SearchStrings(m.sorted, key)
	m.sorted = append(m.sorted, "")
	copy(m.sorted[i+1:], m.sorted[i:])
	m.sorted[i] = key
	m.insertedOrder = append(m.insertedOrder, key)
	return nil
}

func (m *memStore) Scan(ctx context.Context, start string, limit int) (int, error) {
	if err := m.hook(ctx); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.SearchStrings(m.sorted, start)
	n := min(limit, len(m.sorted)-i)
	m.scanned.Add(int64(n))
	return n, nil
}

func (m *memStore) ReadModifyWrite(ctx context.Context, key, field string, value []byte) error {
	if err := m.Read(ctx, key); err != nil {
		return err
	}
	return m.Update(ctx, key, field, value)
}

// Transfer is atomic under the store's mutex, as a transaction is; it refuses what a real
// store's contract forbids (equal keys, a non-positive amount) so the runner is checked too.
func (m *memStore) Transfer(ctx context.Context, from, to string, amount int64) error {
	if err := m.hook(ctx); err != nil {
		return err
	}
	if from == to || amount <= 0 {
		return fmt.Errorf("bad transfer %s -> %s of %d", from, to, amount)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, okFrom := m.docs[from]
	_, okTo := m.docs[to]
	if !okFrom || !okTo {
		return ErrNotFound
	}
	m.balances[from] -= amount
	m.balances[to] += amount
	m.transfers++
	return nil
}

func (m *memStore) Ping(ctx context.Context) error {
	if err := m.hook(ctx); err != nil {
		return err
	}
	m.pings.Add(1)
	return nil
}

func (m *memStore) Count(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.docs)), nil
}

func (m *memStore) Drop(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.docs = map[string][][]byte{}
	m.sorted = nil
	m.drops.Add(1)
	return nil
}

func cfg(workload string) Config {
	c := Defaults()
	c.Workload = workload
	c.Threads = 4
	c.Records = 1000
	c.Ops = 20000
	c.FieldLength = 16
	return c
}

// run runs a config and checks the invariants every run has.
func run(t *testing.T, s Store, c Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), s, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Phases {
		if p.StoppedBy != StopCompleted {
			t.Fatalf("phase %s stopped by %s", p.Phase, p.StoppedBy)
		}
		want := uint64(c.Ops)
		if p.Phase == "load" {
			want = uint64(c.Records)
		}
		if p.Total() != want {
			t.Fatalf("phase %s ran %d operations, want %d", p.Phase, p.Total(), want)
		}
	}
	return res
}

func loaded(t *testing.T, records int64) *memStore {
	t.Helper()
	s := newMemStore()
	c := cfg("load")
	c.Records = records
	res := run(t, s, c)
	if res.Phases[0].Errors() != 0 || int64(len(s.docs)) != records {
		t.Fatalf("load: %d errors, %d docs", res.Phases[0].Errors(), len(s.docs))
	}
	return s
}

func TestLoadInsertsYCSBRecords(t *testing.T) {
	s := loaded(t, 500)
	for n := int64(0); n < 500; n++ {
		d, ok := s.docs[KeyName(n)]
		if !ok {
			t.Fatalf("record %d (%s) missing", n, KeyName(n))
		}
		if len(d) != 10 || len(d[9]) != 16 {
			t.Fatalf("record %d has %d fields of %d bytes", n, len(d), len(d[9]))
		}
		for _, c := range d[0] {
			if !strings.ContainsRune(valueAlphabet, rune(c)) {
				t.Fatalf("value byte %q not printable", c)
			}
		}
	}
}

func share(p *PhaseResult, op OpType) float64 {
	if p.Ops[op] == nil {
		return 0
	}
	return float64(p.Ops[op].Latency.Count()) / float64(p.Total())
}

func TestWorkloadMixes(t *testing.T) {
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "update", "txn"} {
		t.Run(name, func(t *testing.T) {
			s := loaded(t, 1000)
			res := run(t, s, cfg(name))
			w := Workloads[name]
			p := res.Phases[0]
			for op := OpType(0); op < numOpTypes; op++ {
				if got := share(p, op); math.Abs(got-w.Mix[op]) > 0.02 {
					t.Errorf("%s share %.3f, want %.2f", op, got, w.Mix[op])
				}
			}
			// Reads and updates only choose acknowledged records, so nothing is ever missing.
			if p.Errors() != 0 {
				for _, o := range p.Ops {
					if o != nil && o.Errors > 0 {
						t.Errorf("%s: %d errors, first: %s", o.Type, o.Errors, o.FirstError)
					}
				}
			}
			if ins := p.Ops[OpInsert]; ins != nil {
				if got := uint64(len(s.docs)) - 1000; got != ins.Latency.Count() {
					t.Errorf("%d inserts reported, %d new records", ins.Latency.Count(), got)
				}
				// Inserts continue the key sequence after the loaded records.
				for n := int64(1000); n < int64(len(s.docs)); n++ {
					if _, ok := s.docs[KeyName(n)]; !ok {
						t.Errorf("inserted record %d missing", n)
						break
					}
				}
			}
		})
	}
}

func TestWorkloadCReadsAreZipfian(t *testing.T) {
	s := loaded(t, 1000)
	c := cfg("c")
	c.Threads = 1
	run(t, s, c)
	hottest, n := "", 0
	for k, v := range s.reads {
		if v > n {
			hottest, n = k, v
		}
	}
	if want := KeyName(FNVHash64(0) % 1001); hottest != want {
		t.Errorf("hottest key %s (%d reads), want %s", hottest, n, want)
	}
	// Uniform spreads the same reads flat.
	s2 := loaded(t, 1000)
	c.Distribution = DistUniform
	run(t, s2, c)
	maxReads := 0
	for _, v := range s2.reads {
		maxReads = max(maxReads, v)
	}
	if maxReads > n/4 {
		t.Errorf("uniform: hottest key read %d times, zipfian %d", maxReads, n)
	}
}

func TestWorkloadDReadsLatest(t *testing.T) {
	s := loaded(t, 1000)
	c := cfg("d")
	c.Threads = 1
	run(t, s, c)
	// The newest loaded records stay close to the latest insert for the whole run, the oldest
	// stay far from it: with Zipfian popularity by distance, the former are read far more.
	newest, oldest := 0, 0
	for _, k := range s.insertedOrder[900:1000] {
		newest += s.reads[k]
	}
	for _, k := range s.insertedOrder[:100] {
		oldest += s.reads[k]
	}
	if newest < 2*oldest {
		t.Errorf("newest 100 loaded records read %d times, oldest 100 %d: not skewed to latest", newest, oldest)
	}
	t.Logf("reads of the newest 100 loaded records %d, oldest 100 %d", newest, oldest)
}

func TestWorkloadEScanLengths(t *testing.T) {
	s := loaded(t, 1000)
	res := run(t, s, cfg("e"))
	scans := res.Phases[0].Ops[OpScan].Latency.Count()
	mean := float64(s.scanned.Load()) / float64(scans)
	// Lengths are uniform in 1..100 (mean 50.5), minus scans that run off the end of the keys.
	if mean < 40 || mean > 51 {
		t.Errorf("mean scan length %.1f, want about 50", mean)
	}
}

// TestScanWorkloadConstantLength: workload scan runs scans only, and with the constant scan
// length every scan asks for MaxScanLength records (the fixed sort+limit of a scatter-gather
// comparison); uniform lengths average half that.
func TestScanWorkloadConstantLength(t *testing.T) {
	for _, tc := range []struct {
		dist     string
		min, max float64
	}{{ScanLengthConstant, 100, 100}, {"", 40, 51}} {
		s := loaded(t, 20000)
		c := cfg("scan")
		c.Records, c.ScanLengthDistribution = 20000, tc.dist
		res := run(t, s, c)
		ph := res.Phases[len(res.Phases)-1]
		scans := ph.Ops[OpScan].Latency.Count()
		if scans != ph.Total() || scans == 0 {
			t.Fatalf("%q: %d scans of %d operations", tc.dist, scans, ph.Total())
		}
		// Start keys are uniform over 20,000 records: few scans run off the end of the keys.
		mean := float64(s.scanned.Load()) / float64(scans)
		if mean < tc.min-1 || mean > tc.max {
			t.Errorf("%q: mean scan length %.1f, want %v..%v", tc.dist, mean, tc.min, tc.max)
		}
	}
}

func TestDropReloadsThenRuns(t *testing.T) {
	s := loaded(t, 100)
	c := cfg("a")
	c.Drop = true
	c.Records = 300
	res := run(t, s, c)
	if s.drops.Load() != 1 || len(res.Phases) != 2 || res.Phases[0].Phase != "load" || res.Phases[1].Phase != "a" {
		t.Fatalf("drops %d, phases %d", s.drops.Load(), len(res.Phases))
	}
	if len(s.docs) != 300 {
		t.Fatalf("%d records after drop and reload of 300", len(s.docs))
	}
}

func TestPingWorkload(t *testing.T) {
	s := newMemStore()
	c := cfg("ping")
	c.Drop = true // ignored: ping touches no data
	res := run(t, s, c)
	if s.pings.Load() != c.Ops || s.drops.Load() != 0 || len(res.Phases) != 1 {
		t.Fatalf("pings %d drops %d phases %d", s.pings.Load(), s.drops.Load(), len(res.Phases))
	}
}

func TestErrorsCounted(t *testing.T) {
	s := loaded(t, 1000)
	s.failUpdates = true
	res := run(t, s, cfg("a"))
	u := res.Phases[0].Ops[OpUpdate]
	if u.Errors != u.Latency.Count() || u.FirstError != "update refused" {
		t.Fatalf("update errors %d of %d, first %q", u.Errors, u.Latency.Count(), u.FirstError)
	}
	if res.Phases[0].Ops[OpRead].Errors != 0 {
		t.Fatal("read errors")
	}
}

func TestInterruptReturnsPartialResults(t *testing.T) {
	s := newMemStore()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	s.onOp = func(opCtx context.Context) error {
		if n.Add(1) == 500 {
			cancel() // SIGINT arrives mid-run
		}
		return opCtx.Err()
	}
	c := cfg("ping")
	c.Ops = 1_000_000
	res, err := Run(ctx, s, c)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Phases[0]
	if !res.Interrupted || p.StoppedBy != StopInterrupted {
		t.Fatalf("interrupted %v, stopped by %s", res.Interrupted, p.StoppedBy)
	}
	if p.Total() < 400 || p.Total() >= 1_000_000 || p.Errors() != 0 {
		t.Fatalf("partial result has %d ops, %d errors", p.Total(), p.Errors())
	}
}

func TestDurationCap(t *testing.T) {
	s := newMemStore()
	s.onOp = func(ctx context.Context) error {
		select {
		case <-time.After(time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := cfg("ping")
	c.Ops = 1_000_000
	c.Duration = 150 * time.Millisecond
	start := time.Now()
	res, err := Run(context.Background(), s, c)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Phases[0]
	if p.StoppedBy != StopDuration || res.Interrupted || time.Since(start) > 2*time.Second {
		t.Fatalf("stopped by %s after %s", p.StoppedBy, time.Since(start))
	}
	if p.Total() == 0 || p.Ops[OpPing].Latency.Quantile(0.5) < int64(time.Millisecond) {
		t.Fatalf("%d ops, p50 %d", p.Total(), p.Ops[OpPing].Latency.Quantile(0.5))
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range []func(*Config){
		func(c *Config) { c.Workload = "z" },
		func(c *Config) { c.Threads = 0 },
		func(c *Config) { c.Records = 0 },
		func(c *Config) { c.FieldCount = 0 },
		func(c *Config) { c.Distribution = "gaussian" },
		func(c *Config) { c.Ops = -1 },
		func(c *Config) { c.Workload, c.Records = "txn", 1 },
		func(c *Config) { c.ScanLengthDistribution = "zipfian" },
	} {
		c := Defaults()
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	for _, name := range []string{"A", "workloadb", " c ", "load", "PING", "update", "TXN", "scan"} {
		if _, err := LookupWorkload(name); err != nil {
			t.Errorf("LookupWorkload(%q): %v", name, err)
		}
	}
}

func TestReportJSONAndTable(t *testing.T) {
	s := loaded(t, 200)
	c := cfg("f")
	c.Records = 200
	c.Drop = true
	res := run(t, s, c)
	rep := res.Report("mongodb://u:xxxxx@h:1", map[string]string{"writeConcern": "majority"})
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back ReportJSON
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, buf.String())
	}
	if back.Workload != "f" || len(back.Phases) != 2 || back.Config.Distribution != DistZipfian || back.Labels["writeConcern"] != "majority" {
		t.Fatalf("round trip: %+v", back)
	}
	ph := back.Phases[1]
	if ph.Operations != 20000 || ph.Throughput <= 0 || len(ph.Ops) != 2 || ph.Ops[0].Op != "READ" || ph.Ops[1].Op != "READ-MODIFY-WRITE" {
		t.Fatalf("phase: %+v", ph)
	}
	l := ph.Ops[0].LatencyMicros
	if !(l.Min <= l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max) {
		t.Fatalf("latencies not ordered: %+v", l)
	}
	buf.Reset()
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"workload f: 20000 ops", "operation", "p99(us)", "READ-MODIFY-WRITE", "load: 200 ops"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Columns are aligned: within a phase's table every row has the header's width.
	for _, block := range strings.Split(out, "\n\n")[1:] {
		lines := strings.Split(strings.TrimSpace(block), "\n")[1:] // skip the summary line
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "first ") && len(l) != len(lines[0]) {
				t.Errorf("row %q not as wide as the header %q", l, lines[0])
			}
		}
	}
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"mongodb://127.0.0.1:27017":              "mongodb://127.0.0.1:27017",
		"mongodb://bob:secret@h:1/?authSource=x": "mongodb://bob:xxxxx@h:1/?authSource=x",
		"mongodb://bob:secret@a:1,b:2/":          "mongodb://bob:xxxxx@a:1,b:2/",
	} {
		if got := RedactURI(in); got != want {
			t.Errorf("RedactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseConcerns(t *testing.T) {
	if wc, err := ParseWriteConcern("", false); wc != nil || err != nil {
		t.Errorf("empty write concern: %v %v", wc, err)
	}
	wc, err := ParseWriteConcern("majority", true)
	if err != nil || wc.W != "majority" || wc.Journal == nil || !*wc.Journal {
		t.Errorf("majority,j: %+v %v", wc, err)
	}
	if wc, err := ParseWriteConcern("2", false); err != nil || wc.W != 2 {
		t.Errorf("w:2: %+v %v", wc, err)
	}
	if _, err := ParseWriteConcern("-1", false); err == nil {
		t.Error("w:-1 accepted")
	}
	if _, err := ParseWriteConcern("0", true); err == nil {
		t.Error("w:0 with j:true accepted")
	}
	if rc, err := ParseReadConcern("majority"); err != nil || rc.Level != "majority" {
		t.Errorf("majority: %+v %v", rc, err)
	}
	if _, err := ParseReadConcern("strong"); err == nil {
		t.Error("unknown read concern accepted")
	}
}

// slowStore delays every insert; reads and updates go straight to memStore.
type slowStore struct {
	*memStore
	delay time.Duration
}

func (s slowStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	time.Sleep(s.delay)
	return s.memStore.Insert(ctx, key, fields)
}

// TestDurationCapsWorkloadOnly: --duration cuts the workload short, never the load before it,
// which used to end early and leave the workload reading records that were never loaded.
func TestDurationCapsWorkloadOnly(t *testing.T) {
	s := slowStore{newMemStore(), time.Millisecond}
	c := cfg("a")
	c.Drop = true
	c.Records = 200 // 4 threads, 1 ms per insert: about 50 ms, longer than the cap
	c.Ops = 100_000_000
	c.Duration = 20 * time.Millisecond
	res, err := Run(context.Background(), s, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 2 {
		t.Fatalf("%d phases", len(res.Phases))
	}
	l, a := res.Phases[0], res.Phases[1]
	if l.StoppedBy != StopCompleted || l.Total() != 200 || len(s.docs) != 200 {
		t.Fatalf("load stopped by %s after %d records (%d stored)", l.StoppedBy, l.Total(), len(s.docs))
	}
	if a.StoppedBy != StopDuration || a.Total() == 0 || a.Errors() != 0 {
		t.Fatalf("workload stopped by %s after %d ops, %d errors", a.StoppedBy, a.Total(), a.Errors())
	}
	// The load workload itself is the run phase: the cap applies to it.
	c = cfg("load")
	c.Records = 100_000
	c.Duration = 20 * time.Millisecond
	if res, err = Run(context.Background(), slowStore{newMemStore(), time.Millisecond}, c); err != nil || res.Phases[0].StoppedBy != StopDuration {
		t.Fatalf("load with a cap: %v %+v", err, res.Phases[0])
	}
}

// TestAutoLoad: a workload on a collection with fewer records than asked loads the missing ones
// first and says so, instead of failing every read with "record not found".
func TestAutoLoad(t *testing.T) {
	for _, before := range []int64{0, 100} {
		s := newMemStore()
		if before > 0 {
			s = loaded(t, before)
		}
		var notices []string
		c := cfg("c")
		c.Records = 300
		c.Ops = 2000
		c.Notice = func(m string) { notices = append(notices, m) }
		res := run(t, s, c)
		if len(res.Phases) != 2 || res.Phases[0].Phase != "load" || len(s.docs) != 300 {
			t.Fatalf("before %d: %d phases, %d records", before, len(res.Phases), len(s.docs))
		}
		if e := res.Phases[0].Errors() + res.Phases[1].Errors(); e != 0 {
			t.Fatalf("before %d: %d errors (%+v)", before, e, res.Phases[1].Ops[OpRead])
		}
		if len(notices) != 1 || !strings.Contains(notices[0], fmt.Sprintf("holds %d records, fewer than the 300", before)) {
			t.Fatalf("before %d: notices %q", before, notices)
		}
	}
	// Enough records: no load, no notice.
	s := loaded(t, 300)
	c := cfg("c")
	c.Records = 300
	c.Notice = func(m string) { t.Errorf("unexpected notice %q", m) }
	if res := run(t, s, c); len(res.Phases) != 1 {
		t.Fatalf("%d phases on a loaded collection", len(res.Phases))
	}
}

// TestInsertsContinueAfterExistingRecords: a second run of workload D inserts after the records
// the first one added, not into them (which failed as duplicates).
func TestInsertsContinueAfterExistingRecords(t *testing.T) {
	s := loaded(t, 500)
	for range 2 {
		c := cfg("d")
		c.Records = 500
		c.Ops = 4000
		res := run(t, s, c)
		if e := res.Phases[len(res.Phases)-1].Errors(); e != 0 {
			t.Fatalf("%d errors: %+v", e, res.Phases[len(res.Phases)-1].Ops[OpInsert])
		}
	}
}

// TestProgressReports: a running phase reports its state every ProgressInterval, and never
// after Run returns.
func TestProgressReports(t *testing.T) {
	s := loaded(t, 100)
	s.onOp = func(ctx context.Context) error { time.Sleep(100 * time.Microsecond); return nil }
	var mu sync.Mutex
	var reports []Progress
	returned := false
	c := cfg("c")
	c.Records = 100
	c.Ops = 1_000_000
	c.Duration = 150 * time.Millisecond
	c.ProgressInterval = 20 * time.Millisecond
	c.Progress = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Error("progress reported after Run returned")
		}
		reports = append(reports, p)
	}
	if _, err := Run(context.Background(), s, c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	returned = true
	got := append([]Progress(nil), reports...)
	mu.Unlock()
	if len(got) < 3 {
		t.Fatalf("%d progress reports in 150 ms at 20 ms intervals", len(got))
	}
	for i, p := range got {
		if p.Phase != "c" || p.Target != c.Ops || p.Done <= 0 || p.Elapsed <= 0 || (i > 0 && p.Done < got[i-1].Done) {
			t.Fatalf("report %d: %+v", i, p)
		}
	}
	time.Sleep(50 * time.Millisecond) // a leaked reporter would call again now
}

// TestDeadlineErrorNotCounted: an operation failing at the Duration deadline is cut short, not
// failed, even when its error comes before the context's timer marks it done (the driver's
// socket deadline is the context's).
func TestDeadlineErrorNotCounted(t *testing.T) {
	s := newMemStore()
	s.onOp = func(ctx context.Context) error {
		dl, _ := ctx.Deadline()
		time.Sleep(time.Until(dl))
		return errors.New("i/o timeout") // not ctx.Err(): the context may not be done yet
	}
	c := cfg("ping")
	c.Threads = 8
	c.Ops = 1_000_000
	c.Duration = 30 * time.Millisecond
	res, err := Run(context.Background(), s, c)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Phases[0]; p.Errors() != 0 {
		t.Fatalf("%d errors at the deadline counted as failures: %q", p.Errors(), p.Ops[OpPing].FirstError)
	}
}

// TestTxnWorkload: every txn operation is one Transfer between two distinct existing records
// (memStore refuses anything else), money is conserved, and the phase reports TXN only.
func TestTxnWorkload(t *testing.T) {
	for _, dist := range []string{"", DistZipfian, DistLatest} {
		s := loaded(t, 1000)
		c := cfg("txn")
		c.Distribution = dist
		res := run(t, s, c)
		p := res.Phases[0]
		if want := cmp.Or(dist, DistUniform); res.Distribution != want {
			t.Errorf("distribution %q for %q", res.Distribution, dist)
		}
		tx := p.Ops[OpTxn]
		if tx == nil || tx.Latency.Count() != uint64(c.Ops) || tx.Errors != 0 || p.Total() != uint64(c.Ops) {
			t.Fatalf("%s: txn stats %+v, total %d", dist, tx, p.Total())
		}
		var sum int64
		moved := 0
		for _, b := range s.balances {
			sum += b
			if b != 0 {
				moved++
			}
		}
		if sum != 0 || s.transfers != int(c.Ops) || moved < 2 {
			t.Fatalf("%s: balances sum to %d over %d records after %d transfers", dist, sum, moved, s.transfers)
		}
	}
}

// TestTxnTwoRecords: with two records every transfer still has two distinct keys, even under
// a Zipfian draw that keeps choosing the same one.
func TestTxnTwoRecords(t *testing.T) {
	s := loaded(t, 2)
	c := cfg("txn")
	c.Records = 2
	c.Ops = 2000
	c.Distribution = DistZipfian
	res := run(t, s, c)
	if e := res.Phases[0].Errors(); e != 0 {
		t.Fatalf("%d errors: %s", e, res.Phases[0].Ops[OpTxn].FirstError)
	}
	if s.balances[KeyName(0)]+s.balances[KeyName(1)] != 0 || s.transfers != 2000 {
		t.Fatalf("balances %v after %d transfers", s.balances, s.transfers)
	}
}

// shardedMemStore is a memStore whose records live on two shards by key: keys below "user5"
// on s0, the rest on s1 (as if the range had been split and half moved).
type shardedMemStore struct {
	*memStore
	mu        sync.Mutex
	crossSeen int // transfers between records on two shards
}

func (s *shardedMemStore) shard(k string) string {
	if k < "user5" {
		return "s0"
	}
	return "s1"
}

func (s *shardedMemStore) LocateShards(_ context.Context, keys []string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = s.shard(k)
	}
	return out, nil
}

func (s *shardedMemStore) Transfer(ctx context.Context, from, to string, amount int64) error {
	if s.shard(from) != s.shard(to) {
		s.mu.Lock()
		s.crossSeen++
		s.mu.Unlock()
	}
	return s.memStore.Transfer(ctx, from, to, amount)
}

// TestTxnCrossShard: with CrossShard, transfers alternate between one-shard and two-shard
// pairs and each is reported under the type its records' shards say (TXN, TXN-CROSS-SHARD);
// a store that cannot place records refuses the run, and only workload txn takes the option.
func TestTxnCrossShard(t *testing.T) {
	s := &shardedMemStore{memStore: loaded(t, 200)}
	c := cfg("txn")
	c.Records, c.Ops, c.Threads, c.CrossShard = 200, 2000, 1, true
	res := run(t, s, c)
	p := res.Phases[0]
	single, cross := p.Ops[OpTxn], p.Ops[OpTxnCross]
	if single == nil || cross == nil || single.Errors+cross.Errors != 0 {
		t.Fatalf("txn stats %+v / %+v", single, cross)
	}
	if cross.Latency.Count() != uint64(s.crossSeen) || single.Latency.Count()+cross.Latency.Count() != 2000 {
		t.Fatalf("%d cross-shard and %d single-shard reported, %d cross-shard done", cross.Latency.Count(), single.Latency.Count(), s.crossSeen)
	}
	if cross.Latency.Count() != 1000 {
		t.Fatalf("%d of 2000 transfers crossed shards, want every other one", cross.Latency.Count())
	}
	var sum int64
	for _, b := range s.balances {
		sum += b
	}
	if sum != 0 {
		t.Fatalf("balances sum to %d", sum)
	}
	var out bytes.Buffer
	if err := res.Report("", nil).WriteTable(&out); err != nil || !strings.Contains(out.String(), "TXN-CROSS-SHARD") {
		t.Fatalf("report %q, %v", out.String(), err)
	}

	if _, err := Run(context.Background(), loaded(t, 200), c); err == nil || !strings.Contains(err.Error(), "sharded collection") {
		t.Fatalf("unsharded store: %v", err)
	}
	c.Workload = "a"
	if err := c.Validate(); err == nil {
		t.Fatal("CrossShard accepted for workload a")
	}
}
