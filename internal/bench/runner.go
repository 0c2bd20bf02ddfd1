package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one benchmark run.
type Config struct {
	Workload string // a..f, load, ping, update or txn

	Records     int64 // records loaded (and assumed loaded by a workload)
	Ops         int64 // operations of the workload phase
	Threads     int   // concurrent clients
	FieldCount  int   // fields per record
	FieldLength int   // bytes per field value

	// Distribution overrides the workload's key distribution: zipfian, uniform or latest.
	Distribution string
	// MaxScanLength bounds the scans of workloads E and scan; the length is uniform in
	// [1, MaxScanLength], or always MaxScanLength when ScanLengthDistribution is "constant".
	MaxScanLength int
	// ScanLengthDistribution is YCSB's scanlengthdistribution: uniform (the default, "") or
	// constant (every scan asks for MaxScanLength records: a fixed find().sort().limit(N)).
	ScanLengthDistribution string

	// Drop drops the collection and runs the load phase before the workload.
	Drop bool
	// Duration, if positive, caps the wall-clock time of the workload's own phase; a load run
	// before it (--drop, or automatic) always completes, so the workload finds every record.
	Duration time.Duration
	// Seed makes key choices and values reproducible (per thread; thread interleaving is not).
	Seed uint64
	// CrossShard (workload txn, a Store that is a ShardLocator) spreads the records over two
	// shards and alternates transfers between two records on one shard (OpTxn) and on two
	// (OpTxnCross), so one run prices a cross-shard transaction next to a single-shard one.
	CrossShard bool

	// Progress, if set, is called every ProgressInterval while a phase runs (from a goroutine of
	// the runner's, never concurrently with itself).
	Progress         func(Progress)
	ProgressInterval time.Duration
	// Notice, if set, is told what the runner decided on its own: an automatic load.
	Notice func(string)
}

// Progress is a running phase's state, for a progress line.
type Progress struct {
	Phase   string
	Elapsed time.Duration
	Done    int64 // operations (or records, loading) completed or in flight
	Target  int64 // operations the phase runs unless cut short
	Errors  uint64
}

// Defaults are YCSB's CoreWorkload defaults where YCSB has one.
func Defaults() Config {
	return Config{Workload: "c", Records: 1000, Ops: 10000, Threads: 1, FieldCount: 10, FieldLength: 100,
		MaxScanLength: 100, Seed: 1}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	w, err := LookupWorkload(c.Workload)
	if err != nil {
		return err
	}
	switch {
	case c.Threads < 1:
		return fmt.Errorf("threads must be at least 1, got %d", c.Threads)
	case c.Records < 0 || (c.Records == 0 && w.Name != "ping"):
		return fmt.Errorf("records must be at least 1, got %d", c.Records)
	case w.Mix[OpTxn] > 0 && c.Records < 2:
		return fmt.Errorf("workload %s moves amounts between two records: records must be at least 2, got %d", w.Name, c.Records)
	case c.Ops < 0:
		return fmt.Errorf("ops must not be negative, got %d", c.Ops)
	case c.FieldCount < 1:
		return fmt.Errorf("field-count must be at least 1, got %d", c.FieldCount)
	case c.FieldLength < 0:
		return fmt.Errorf("field-length must not be negative, got %d", c.FieldLength)
	case c.MaxScanLength < 1:
		return fmt.Errorf("max scan length must be at least 1, got %d", c.MaxScanLength)
	case c.Duration < 0:
		return fmt.Errorf("duration must not be negative, got %s", c.Duration)
	case c.CrossShard && w.Mix[OpTxn] == 0:
		return fmt.Errorf("cross-shard transactions are workload txn's: workload %s runs none", w.Name)
	}
	switch c.Distribution {
	case "", DistZipfian, DistUniform, DistLatest:
	default:
		return fmt.Errorf("unknown distribution %q (zipfian, uniform or latest)", c.Distribution)
	}
	switch c.ScanLengthDistribution {
	case "", ScanLengthUniform, ScanLengthConstant:
	default:
		return fmt.Errorf("unknown scan length distribution %q (uniform or constant)", c.ScanLengthDistribution)
	}
	return nil
}

// Stop reasons of a phase.
const (
	StopCompleted   = "completed"   // every operation ran
	StopDuration    = "duration"    // the --duration cap ended the phase
	StopInterrupted = "interrupted" // the caller's context was cancelled (SIGINT)
)

// PhaseResult is the outcome of one phase (load or a workload).
type PhaseResult struct {
	Phase      string // "load" or the workload name
	StoppedBy  string
	Elapsed    time.Duration
	Ops        [numOpTypes]*OpStats // nil for types the phase never ran
	Throughput float64              // completed operations (errors included) per second
}

// OpStats are one operation type's results, merged over threads.
type OpStats struct {
	Type       OpType
	Latency    *Histogram // nanoseconds, successful and failed operations alike
	Errors     uint64
	FirstError string // the first error seen, to tell "not supported" from a slow server
}

// Total is the number of operations completed in the phase.
func (p *PhaseResult) Total() uint64 {
	var n uint64
	for _, s := range p.Ops {
		if s != nil {
			n += s.Latency.Count()
		}
	}
	return n
}

// Errors is the number of failed operations in the phase.
func (p *PhaseResult) Errors() uint64 {
	var n uint64
	for _, s := range p.Ops {
		if s != nil {
			n += s.Errors
		}
	}
	return n
}

// Result is a benchmark run: its configuration and one result per phase run.
type Result struct {
	Config       Config
	Distribution string // the effective key distribution
	Phases       []*PhaseResult
	Interrupted  bool
}

// Run runs the benchmark against store: optionally drop and load, then the workload. It
// returns the phases run so far even when interrupted (ctx cancelled): the partial result is
// the point of catching SIGINT. The error reports a failure to run at all (drop failed, bad
// configuration), not failed operations, which are counted.
func Run(ctx context.Context, store Store, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w, _ := LookupWorkload(cfg.Workload)
	res := &Result{Config: cfg, Distribution: cfg.Distribution}
	if res.Distribution == "" {
		res.Distribution = w.Distribution
	}
	load := Workloads["load"]
	// existing is how many records the collection holds before the workload phase: its inserts
	// (workloads D and E) continue after them rather than collide with an earlier run's.
	existing := cfg.Records
	switch {
	case w.Name == "ping": // touches no data, so --drop does not apply to it
	case w.Load:
		if cfg.Drop {
			if err := store.Drop(ctx); err != nil {
				return res, fmt.Errorf("dropping the collection: %w", err)
			}
		}
		pr := runPhase(ctx, store, &cfg, &w, res.Distribution, phaseOpts{capped: true})
		res.Phases = append(res.Phases, pr)
		res.Interrupted = pr.StoppedBy == StopInterrupted
		return res, nil
	case cfg.Drop:
		if err := store.Drop(ctx); err != nil {
			return res, fmt.Errorf("dropping the collection: %w", err)
		}
		pr := runPhase(ctx, store, &cfg, &load, res.Distribution, phaseOpts{})
		res.Phases = append(res.Phases, pr)
		if pr.StoppedBy == StopInterrupted {
			res.Interrupted = true
			return res, nil
		}
	default:
		n, err := store.Count(ctx)
		if err != nil {
			return res, fmt.Errorf("counting the records: %w", err)
		}
		if n < cfg.Records {
			// Reads of records never loaded would all fail "record not found".
			if cfg.Notice != nil {
				cfg.Notice(fmt.Sprintf("the collection holds %d records, fewer than the %d asked for: loading them first (records already there are kept)", n, cfg.Records))
			}
			pr := runPhase(ctx, store, &cfg, &load, res.Distribution, phaseOpts{skipExisting: true})
			res.Phases = append(res.Phases, pr)
			if pr.StoppedBy == StopInterrupted {
				res.Interrupted = true
				return res, nil
			}
			n = cfg.Records
		}
		existing = n
	}
	opts := phaseOpts{capped: true, existing: existing}
	if cfg.CrossShard {
		var err error
		if opts.shardOf, err = locateRecords(ctx, store, cfg.Records); err != nil {
			return res, err
		}
	}
	pr := runPhase(ctx, store, &cfg, &w, res.Distribution, opts)
	res.Phases = append(res.Phases, pr)
	res.Interrupted = pr.StoppedBy == StopInterrupted
	return res, nil
}

// phaseOpts are how Run runs one phase.
type phaseOpts struct {
	capped       bool  // Config.Duration applies
	skipExisting bool  // loading: a record already there (ErrDuplicate) counts as loaded
	existing     int64 // workload: records present; inserts take numbers from here (0: Records)
	// shardOf is each record key's shard (Config.CrossShard), nil otherwise.
	shardOf map[string]string
}

// locateRecords asks store, a ShardLocator, to spread records 0..records-1 over two shards
// and say where each is.
func locateRecords(ctx context.Context, store Store, records int64) (map[string]string, error) {
	sl, ok := store.(ShardLocator)
	if !ok {
		return nil, errors.New("cross-shard transactions need a sharded collection behind a router")
	}
	keys := make([]string, records)
	var buf []byte
	for i := range keys {
		buf = appendKeyName(buf[:0], int64(i))
		keys[i] = string(buf)
	}
	where, err := sl.LocateShards(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("placing the records on two shards: %w", err)
	}
	return where, nil
}

// phase is the state shared by the threads of one phase.
type phase struct {
	cfg     *Config
	w       *Workload
	store   Store
	inserts *AckCounter // key numbers of inserts; Last bounds the keys reads may choose
	keys    KeyChooser
	claimed atomic.Int64 // operations (or, loading, records) claimed by threads
	limit   int64
	fields  []string // "field0".."fieldN-1"
	errors  atomic.Uint64
	opts    phaseOpts
}

func runPhase(ctx context.Context, store Store, cfg *Config, w *Workload, dist string, o phaseOpts) *PhaseResult {
	p := &phase{cfg: cfg, w: w, store: store, inserts: NewAckCounter(max(cfg.Records, o.existing)), limit: cfg.Ops, opts: o}
	if w.Load {
		// Loading inserts key numbers 0..Records-1, claimed through the same counter.
		p.inserts = NewAckCounter(0)
		p.limit = cfg.Records
	}
	switch dist {
	case DistUniform:
		p.keys = Uniform{p.inserts}
	case DistLatest:
		p.keys = NewSkewedLatest(p.inserts)
	default:
		p.keys = NewZipfianKeys(p.inserts, cfg.Records, w.expectedInserts(cfg.Ops))
	}
	p.fields = make([]string, cfg.FieldCount)
	for i := range p.fields {
		p.fields[i] = "field" + strconv.Itoa(i)
	}

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if cfg.Duration > 0 && o.capped {
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
	}
	defer cancel()

	threads := make([]*thread, cfg.Threads)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range threads {
		t := &thread{p: p, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))}
		threads[i] = t
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.run(runCtx)
		}()
	}
	stopProgress := p.reportProgress(start)
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)

	pr := &PhaseResult{Phase: w.Name, Elapsed: elapsed, StoppedBy: StopCompleted}
	switch {
	case ctx.Err() != nil:
		pr.StoppedBy = StopInterrupted
	case runCtx.Err() != nil || pastDeadline(runCtx):
		// The threads may all have stopped on the driver's i/o timeout (see pastDeadline)
		// before runCtx's own timer marked it done.
		pr.StoppedBy = StopDuration
	}
	for _, t := range threads {
		for op, s := range t.stats {
			if s == nil {
				continue
			}
			if pr.Ops[op] == nil {
				pr.Ops[op] = &OpStats{Type: OpType(op), Latency: NewHistogram()}
			}
			m := pr.Ops[op]
			m.Latency.Merge(s.Latency)
			m.Errors += s.Errors
			if m.FirstError == "" {
				m.FirstError = s.FirstError
			}
		}
	}
	if secs := elapsed.Seconds(); secs > 0 {
		pr.Throughput = float64(pr.Total()) / secs
	}
	return pr
}

// reportProgress calls Config.Progress every ProgressInterval from a goroutine it owns, until
// the returned stop is called (stop waits for it to end, so no call comes after).
func (p *phase) reportProgress(start time.Time) (stop func()) {
	if p.cfg.Progress == nil || p.cfg.ProgressInterval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(p.cfg.ProgressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				p.cfg.Progress(Progress{Phase: p.w.Name, Elapsed: time.Since(start),
					Done: min(p.claimed.Load(), p.limit), Target: p.limit, Errors: p.errors.Load()})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// thread is one benchmark client: it owns its random source, value buffer and histograms.
type thread struct {
	p     *phase
	rng   *rand.Rand
	stats [numOpTypes]*OpStats
	txns  int // transfers so far (Config.CrossShard alternates their kind)
	key   []byte
	vals  [][]byte // FieldCount value buffers, refilled per write
}

func (t *thread) run(ctx context.Context) {
	p := t.p
	t.vals = make([][]byte, p.cfg.FieldCount)
	for i := range t.vals {
		t.vals[i] = make([]byte, p.cfg.FieldLength)
	}
	for ctx.Err() == nil {
		if p.claimed.Add(1) > p.limit {
			return
		}
		op := p.w.chooseOp(t.rng.Float64())
		start := time.Now()
		op, err := t.do(ctx, op)
		d := time.Since(start)
		if err != nil && (ctx.Err() != nil || pastDeadline(ctx) || nearDeadline(ctx) && isTimeout(err)) {
			// Cut short by the deadline or SIGINT: neither a latency nor a failure of the server.
			return
		}
		s := t.stats[op]
		if s == nil {
			s = &OpStats{Type: op, Latency: NewHistogram()}
			t.stats[op] = s
		}
		s.Latency.RecordDuration(d)
		if err != nil {
			s.Errors++
			p.errors.Add(1)
			if s.FirstError == "" {
				s.FirstError = err.Error()
			}
		}
	}
}

// nearDeadline reports whether ctx's deadline is less than a round trip away: the driver
// refuses to send an operation whose server-side time limit (the time left less its RTT
// estimate) would be zero ("calculated server-side timeout ... is less than or equal to 0"),
// before ctx itself is done.
func nearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < 100*time.Millisecond
}

// pastDeadline reports whether ctx's deadline has passed. The driver sets its socket deadline
// from ctx's, so its i/o timeout can come a moment before ctx's own timer marks ctx done.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// do runs one operation of type op and returns the type it counts as (a transfer between
// shards is OpTxnCross).
func (t *thread) do(ctx context.Context, op OpType) (OpType, error) {
	p := t.p
	switch op {
	case OpPing:
		return op, p.store.Ping(ctx)
	case OpInsert:
		n := p.inserts.Next()
		t.fill(t.vals...)
		if err := p.store.Insert(ctx, t.keyName(n), t.vals); err != nil && !(p.opts.skipExisting && errors.Is(err, ErrDuplicate)) {
			return op, err
		}
		p.inserts.Ack(n)
		return op, nil
	case OpRead:
		return op, p.store.Read(ctx, t.keyName(p.keys.Next(t.rng)))
	case OpUpdate, OpReadModifyWrite:
		key := t.keyName(p.keys.Next(t.rng))
		// YCSB's default writeallfields=false: one randomly chosen field gets a new value.
		f := t.rng.IntN(len(p.fields))
		t.fill(t.vals[0])
		if op == OpUpdate {
			return op, p.store.Update(ctx, key, p.fields[f], t.vals[0])
		}
		return op, p.store.ReadModifyWrite(ctx, key, p.fields[f], t.vals[0])
	case OpScan:
		key := t.keyName(p.keys.Next(t.rng))
		n := p.cfg.MaxScanLength
		if p.cfg.ScanLengthDistribution != ScanLengthConstant {
			n = 1 + t.rng.IntN(n)
		}
		_, err := p.store.Scan(ctx, key, n)
		return op, err
	case OpTxn:
		if p.opts.shardOf == nil {
			a, b := t.twoKeys()
			return op, p.store.Transfer(ctx, t.keyName(a), t.keyName(b), 1+t.rng.Int64N(maxTransfer))
		}
		from, to := t.shardPair(t.txns%2 == 1)
		t.txns++
		if p.opts.shardOf[from] != p.opts.shardOf[to] {
			op = OpTxnCross
		}
		return op, p.store.Transfer(ctx, from, to, 1+t.rng.Int64N(maxTransfer))
	}
	return op, errors.New("bench: unknown operation type " + op.String())
}

// maxTransfer bounds the amount one OpTxn moves (uniform in 1..maxTransfer).
const maxTransfer = 100

// twoKeys draws two distinct key numbers from the phase's distribution: a second draw equal to
// the first is redrawn a few times (a hot Zipfian key repeats often), then replaced by the
// next record, so the loop is bounded whatever the distribution.
func (t *thread) twoKeys() (a, b int64) {
	a = t.p.keys.Next(t.rng)
	for range 8 {
		if b = t.p.keys.Next(t.rng); b != a {
			return a, b
		}
	}
	if last := t.p.inserts.Last(); a < last {
		return a, a + 1
	}
	return a, 0 // a is the last record; Validate guarantees a record 0 distinct from it
}

// shardPair draws two distinct records, on two shards if cross, else on one (redrawing the
// second a bounded number of times; when the draws never fit, the pair is what it is and
// is counted by where its records are).
func (t *thread) shardPair(cross bool) (from, to string) {
	shardOf := t.p.opts.shardOf
	a, b := t.twoKeys()
	from, to = t.keyName(a), t.keyName(b)
	for range 64 {
		if (shardOf[from] != shardOf[to]) == cross && from != to {
			break
		}
		to = t.keyName(t.p.keys.Next(t.rng))
	}
	if from == to {
		return t.keyName(a), t.keyName(b)
	}
	return from, to
}

func (t *thread) keyName(n int64) string {
	t.key = appendKeyName(t.key[:0], n)
	return string(t.key)
}

// valueAlphabet is what field values are made of: printable, so values are valid UTF-8 strings.
const valueAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// fill overwrites bufs with random printable bytes, eight bytes of randomness at a time.
func (t *thread) fill(bufs ...[]byte) {
	for _, b := range bufs {
		var r uint64
		for i := range b {
			if i%8 == 0 {
				r = t.rng.Uint64()
			}
			b[i] = valueAlphabet[(r&0xff)%uint64(len(valueAlphabet))]
			r >>= 8
		}
	}
}
