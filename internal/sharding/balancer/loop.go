package balancer

// The balancer thread (MongoDB 7.0's Balancer::_mainThread, _splitChunksIfNeeded,
// _moveChunks, BalancerChunkSelectionPolicy::selectChunksToSplit/selectChunksToMove and
// getDataSizeInfoForCollections). It runs on the config server primary only: Start watches
// the node and runs the loop while it is a writable primary, stopping it on step-down and
// starting it again on the next step-up, so balancing survives a config primary failover.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/configsvr"
	"humongo/internal/sharding/routing"
)

const (
	// DefaultRoundInterval is the wait after a round that moved nothing
	// (kBalanceRoundDefaultInterval).
	DefaultRoundInterval = 10 * time.Second
	// DefaultMigrationsThrottling is balancerMigrationsThrottlingMs's default: the wait after
	// a round that scheduled migrations.
	DefaultMigrationsThrottling = time.Second
	// actionLogSizeBytes is config.actionlog's capped size (kActionLogCollectionSizeMB).
	actionLogSizeBytes = 20 << 20
)

// Shards runs commands on shards' primaries (errors for ok: 0 carry the remote code).
type Shards interface {
	Run(ctx context.Context, shard, db string, cmd bsoncore.Document) (bsoncore.Document, error)
}

// Config configures a Balancer.
type Config struct {
	Node   configsvr.Node
	Run    RunFunc
	Shards Shards
	Log    *slog.Logger
	// Interval is the wait after a round with nothing to move (balancerRoundIntervalMs);
	// nil means DefaultRoundInterval.
	Interval func() time.Duration
	// Throttle is the wait after a round with migrations (balancerMigrationsThrottlingMs);
	// nil means DefaultMigrationsThrottling.
	Throttle func() time.Duration
	// Now is the clock of the activeWindow (local time); nil means time.Now.
	Now func() time.Time
	// Host names this node in config.actionlog.
	Host string
}

// Balancer is one config server node's balancer. Safe for concurrent use.
type Balancer struct {
	cfg Config

	mu        sync.Mutex
	inRound   bool
	rounds    int64
	roundDone chan struct{} // closed at the end of each round
	wake      chan struct{}
	loops     int // loops running (0 or 1)
}

// running reports whether the loop runs (tests).
func (b *Balancer) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loops > 0
}

// New returns a stopped balancer.
func New(cfg Config) *Balancer {
	if cfg.Interval == nil {
		cfg.Interval = func() time.Duration { return DefaultRoundInterval }
	}
	if cfg.Throttle == nil {
		cfg.Throttle = func() time.Duration { return DefaultMigrationsThrottling }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	return &Balancer{cfg: cfg, roundDone: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Status is Balancer::report's state: whether a round is running and how many ended.
func (b *Balancer) Status() (inRound bool, rounds int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inRound, b.rounds
}

// Wake starts the next round now (notifyPersistedBalancerSettingsChanged).
func (b *Balancer) Wake() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// JoinCurrentRound waits for the round in progress, if any, to end (balancerStop answers
// once no migration of the balancer is running any more).
func (b *Balancer) JoinCurrentRound(ctx context.Context) error {
	b.mu.Lock()
	in, done := b.inRound, b.roundDone
	b.mu.Unlock()
	if !in {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Balancer) beginRound() {
	b.mu.Lock()
	b.inRound = true
	b.mu.Unlock()
}

func (b *Balancer) endRound() {
	b.mu.Lock()
	b.inRound = false
	b.rounds++
	close(b.roundDone)
	b.roundDone = make(chan struct{})
	b.mu.Unlock()
}

// Start runs the balancer while the node is a writable primary: the loop starts on step-up
// and stops on step-down (its context cancelled, which interrupts the round's commands).
// stop ends the watcher and the loop and waits for both.
func (b *Balancer) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var loopCancel context.CancelFunc
		var loopDone chan struct{}
		term := int64(-1)
		stopLoop := func() {
			if loopCancel != nil {
				loopCancel()
				<-loopDone
				loopCancel, loopDone = nil, nil
				b.cfg.Log.Info("CSRS balancer is now stopped", logv2.C(logv2.Sharding), logv2.ID(21867))
			}
		}
		defer stopLoop()
		for {
			_, changed := b.cfg.Node.TopologyVersion()
			primary, t := b.cfg.Node.IsWritablePrimary(), b.cfg.Node.Term()
			if loopCancel != nil && (!primary || t != term) {
				stopLoop()
			}
			if primary && loopCancel == nil {
				b.cfg.Log.Info("CSRS balancer is starting", logv2.C(logv2.Sharding), logv2.ID(21856))
				loopCancel, loopDone = b.startLoop(ctx)
				term = t
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// startLoop runs loop in a goroutine until cancel; done closes when it has returned.
func (b *Balancer) startLoop(ctx context.Context) (cancel context.CancelFunc, done chan struct{}) {
	ctx, cancel = context.WithCancel(ctx)
	done = make(chan struct{})
	b.mu.Lock()
	b.loops++
	b.mu.Unlock()
	go func() {
		defer close(done)
		defer func() {
			b.mu.Lock()
			b.loops--
			b.mu.Unlock()
		}()
		b.loop(ctx)
	}()
	return cancel, done
}

// loop is _mainThread: a round, then a wait (the throttle after migrations, the interval
// otherwise, cut short by Wake), until ctx ends.
func (b *Balancer) loop(ctx context.Context) {
	for ctx.Err() == nil {
		b.beginRound()
		start := time.Now()
		res, err := b.Round(ctx)
		wait := b.cfg.Interval()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			b.cfg.Log.Info("Error while doing balance", logv2.C(logv2.Sharding), logv2.ID(21865), "error", err.Error())
			b.logRound(ctx, start, res, err)
		case res.Candidates > 0:
			b.logRound(ctx, start, res, nil)
			wait = b.cfg.Throttle()
		}
		b.endRound()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-b.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RoundResult is what a round did.
type RoundResult struct {
	// Skipped: balancing is off or outside its window.
	Skipped bool
	Splits  int
	// Candidates are the migrations scheduled, Moved those that succeeded, Jumbo the chunks
	// flagged jumbo after ChunkTooBig.
	Candidates, Moved, Jumbo int
}

// collection is a config.collections entry with its balancing options.
type collection struct {
	catalogcache.Collection
	noBalance         bool
	maxChunkSizeBytes int64
}

// Round runs one balancer round: settings, zone-boundary splits, then the migrations of the
// policy, run concurrently (their shards are disjoint) and waited for.
func (b *Balancer) Round(ctx context.Context) (RoundResult, error) {
	var res RoundResult
	settings, err := ReadSettings(ctx, b.cfg.Run)
	if err != nil {
		return res, err
	}
	if !settings.ShouldBalance(b.cfg.Now()) {
		res.Skipped = true
		return res, nil
	}
	shards, err := b.shards(ctx)
	if err != nil {
		return res, err
	}
	colls, err := b.collections(ctx, settings)
	if err != nil {
		return res, err
	}
	for _, c := range colls {
		n, err := b.splitAtZones(ctx, c)
		res.Splits += n
		if err != nil {
			b.cfg.Log.Warn("Unable to enforce zone range policy for collection", logv2.C(logv2.Sharding), logv2.ID(21852),
				"namespace", c.NS, "error", err.Error())
		}
	}
	var balanceable []collection
	for _, c := range colls {
		if !c.noBalance {
			balanceable = append(balanceable, c)
		}
	}
	if len(shards) < 2 || len(balanceable) == 0 {
		return res, nil
	}
	sizes, err := b.dataSizes(ctx, shards, balanceable)
	if err != nil {
		return res, err
	}
	available := map[string]bool{}
	for _, s := range shards {
		available[s.ID] = true
	}
	rand.Shuffle(len(balanceable), func(i, j int) { balanceable[i], balanceable[j] = balanceable[j], balanceable[i] })
	type job struct {
		m Migration
		c collection
	}
	var jobs []job
	for _, c := range balanceable {
		if len(available) < 2 {
			break
		}
		d, err := b.distribution(ctx, c, sizes[c.NS])
		if err == nil {
			err = CheckZoneBoundaries(d)
		}
		if err != nil {
			b.cfg.Log.Warn("Unable to balance collection", logv2.C(logv2.Sharding), logv2.ID(21853), "namespace", c.NS, "error", err.Error())
			continue
		}
		migs, _ := Balance(shards, d, available, Options{ForceJumbo: settings.AttemptToBalanceJumboChunks})
		for _, m := range migs {
			jobs = append(jobs, job{m, c})
		}
	}
	res.Candidates = len(jobs)
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { errs[i] = b.move(ctx, j.c, j.m, settings) })
	}
	wg.Wait()
	for i, err := range errs {
		m := jobs[i].m
		switch {
		case err == nil:
			res.Moved++
		case mongoerr.Is(err, mongoerr.ChunkTooBig):
			// The chunk is too big to move: flag it jumbo so that it is never scheduled
			// again (clearJumboFlag clears it).
			if jerr := b.markJumbo(ctx, jobs[i].c, m.Min); jerr != nil {
				b.cfg.Log.Warn("Failed to mark a chunk jumbo", logv2.C(logv2.Sharding), logv2.ID(9130001),
					"migrateInfo", m.String(), "error", jerr.Error())
			} else {
				res.Jumbo++
			}
			b.cfg.Log.Info("Migration failed, the chunk is jumbo", logv2.C(logv2.Sharding), logv2.ID(21871),
				"migrateInfo", m.String(), "error", err.Error())
		default:
			b.cfg.Log.Info("Migration failed", logv2.C(logv2.Sharding), logv2.ID(21872), "migrateInfo", m.String(), "error", err.Error())
		}
	}
	return res, nil
}

// CollectionStatus is Balancer::getBalancerStatusForNs: whether ns needs no action, else
// the first violation the balancer would address ("zoneViolation" while a chunk needs a
// zone split, then the reason of the first migration), and its chunk size in MB.
func (b *Balancer) CollectionStatus(ctx context.Context, ns string) (compliant bool, violation string, chunkSizeMB int64, err error) {
	settings, err := ReadSettings(ctx, b.cfg.Run)
	if err != nil {
		return false, "", 0, err
	}
	doc, found, err := findOne(ctx, b.cfg.Run, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build())
	if err != nil {
		return false, "", 0, err
	}
	if !found {
		return false, "", 0, mongoerr.New(mongoerr.NamespaceNotSharded, "Collection unsharded or undefined")
	}
	c, err := parseCollection(doc, settings)
	if err != nil {
		return false, "", 0, err
	}
	chunkSizeMB = c.maxChunkSizeBytes >> 20
	shards, err := b.shards(ctx)
	if err != nil {
		return false, "", chunkSizeMB, err
	}
	d, err := b.distribution(ctx, c, nil)
	if err != nil {
		return false, "", chunkSizeMB, err
	}
	if len(SplitsForZones(d)) > 0 {
		return false, ReasonZoneViolation.String(), chunkSizeMB, nil
	}
	sizes, err := b.dataSizes(ctx, shards, []collection{c})
	if err != nil {
		return false, "", chunkSizeMB, err
	}
	d.DataSize = sizes[ns]
	available := map[string]bool{}
	for _, s := range shards {
		available[s.ID] = true
	}
	if _, reason := Balance(shards, d, available, Options{ForceJumbo: settings.AttemptToBalanceJumboChunks}); reason != ReasonNone {
		return false, reason.String(), chunkSizeMB, nil
	}
	return true, "", chunkSizeMB, nil
}

// shards reads config.shards.
func (b *Balancer) shards(ctx context.Context) ([]Shard, error) {
	docs, err := findAll(ctx, b.cfg.Run, "shards", bsoncore.NewDocumentBuilder().Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build())
	if err != nil {
		return nil, err
	}
	out := make([]Shard, 0, len(docs))
	for _, d := range docs {
		id, ok := d.Lookup("_id").StringValueOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.UnsupportedFormat, "invalid config.shards document: %s", d)
		}
		s := Shard{ID: id}
		s.Draining, _ = d.Lookup("draining").BooleanOK()
		if tags, ok := d.Lookup("tags").ArrayOK(); ok {
			vals, _ := tags.Values()
			for _, v := range vals {
				if z, ok := v.StringValueOK(); ok {
					s.Zones = append(s.Zones, z)
				}
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func parseCollection(d bsoncore.Document, s Settings) (collection, error) {
	cc, err := configclient.ParseCollection(d)
	if err != nil {
		return collection{}, err
	}
	c := collection{Collection: cc, maxChunkSizeBytes: s.MaxChunkSizeBytes}
	// canBalanceCollection: noBalance (sh.disableBalancing), allowMigrations: false
	// (setAllowMigrations) and permitMigrations: false keep the balancer away.
	if nb, _ := d.Lookup("noBalance").BooleanOK(); nb {
		c.noBalance = true
	}
	if v, ok := d.Lookup("allowMigrations").BooleanOK(); ok && !v {
		c.noBalance = true
	}
	if v, ok := d.Lookup("permitMigrations").BooleanOK(); ok && !v {
		c.noBalance = true
	}
	if n, ok := d.Lookup("maxChunkSizeBytes").AsInt64OK(); ok && n > 0 {
		c.maxChunkSizeBytes = n
	}
	return c, nil
}

// collections reads config.collections.
func (b *Balancer) collections(ctx context.Context, s Settings) ([]collection, error) {
	docs, err := findAll(ctx, b.cfg.Run, "collections", bsoncore.NewDocumentBuilder().Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build())
	if err != nil {
		return nil, err
	}
	var out []collection
	for _, d := range docs {
		c, err := parseCollection(d, s)
		if err != nil {
			b.cfg.Log.Warn("Skipping an unreadable config.collections entry", logv2.C(logv2.Sharding), logv2.ID(9130002),
				"entry", d.String(), "error", err.Error())
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// distribution reads the collection's chunks and zone ranges (bounds extended to the whole
// shard key, as ZoneInfo::getZonesForCollection does).
func (b *Balancer) distribution(ctx context.Context, c collection, sizes map[string]int64) (Distribution, error) {
	d := Distribution{NS: c.NS, DataSize: sizes, MaxChunkSizeBytes: c.maxChunkSizeBytes}
	docs, err := findAll(ctx, b.cfg.Run, "chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, c.UUID[:]).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("min", 1).Build())
	if err != nil {
		return d, err
	}
	for _, doc := range docs {
		ch, err := routing.ParseConfigChunk(doc, c.Gen)
		if err != nil {
			return d, err
		}
		d.Chunks = append(d.Chunks, Chunk{Min: ch.Min, Max: ch.Max, Shard: ch.Shard, Jumbo: ch.Jumbo})
	}
	if len(d.Chunks) == 0 {
		return d, mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s has no chunks", c.NS)
	}
	tags, err := findAll(ctx, b.cfg.Run, "tags", bsoncore.NewDocumentBuilder().AppendString("ns", c.NS).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32("min", 1).Build())
	if err != nil {
		return d, err
	}
	var set configsvr.ZoneSet
	for _, t := range tags {
		min, _ := t.Lookup("min").DocumentOK()
		max, _ := t.Lookup("max").DocumentOK()
		zone, _ := t.Lookup("tag").StringValueOK()
		emin, err := configsvr.ExtendBound(c.Pattern.Doc(), min)
		if err != nil {
			return d, fmt.Errorf("Unable to load zones for collection %s: %w", c.NS, err)
		}
		emax, err := configsvr.ExtendBound(c.Pattern.Doc(), max)
		if err != nil {
			return d, fmt.Errorf("Unable to load zones for collection %s: %w", c.NS, err)
		}
		if err := set.Add(configsvr.Zone{Min: emin, Max: emax, Name: zone}); err != nil {
			return d, fmt.Errorf("Unable to load zones for collection %s: %w", c.NS, err)
		}
	}
	for _, z := range set.Ranges() {
		d.Zones = append(d.Zones, ZoneRange{Min: z.Min, Max: z.Max, Zone: z.Name})
	}
	return d, nil
}

// splitAtZones splits the collection's chunks that a zone boundary falls inside: splitChunk
// to the owning shard, as _splitChunksIfNeeded does.
func (b *Balancer) splitAtZones(ctx context.Context, c collection) (int, error) {
	d, err := b.distribution(ctx, c, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sp := range SplitsForZones(d) {
		keys := bsoncore.NewArrayBuilder()
		for _, p := range sp.Points {
			keys.AppendDocument(p)
		}
		cmd := bsoncore.NewDocumentBuilder().AppendString("splitChunk", c.NS).AppendString("from", sp.Shard).
			AppendDocument("keyPattern", c.Pattern.Doc()).AppendObjectID("epoch", c.Gen.Epoch).
			AppendTimestamp("timestamp", c.Gen.Timestamp.T, c.Gen.Timestamp.I).
			AppendDocument("min", sp.Min).AppendDocument("max", sp.Max).AppendArray("splitKeys", keys.Build()).Build()
		if _, err := b.cfg.Shards.Run(ctx, sp.Shard, "admin", cmd); err != nil {
			return n, fmt.Errorf("split of [%s, %s) on %s: %w", bsonutil.FormatDoc(sp.Min), bsonutil.FormatDoc(sp.Max), sp.Shard, err)
		}
		n++
	}
	return n, nil
}

// dataSizes asks every shard, concurrently, for the collections' data sizes in bytes
// (_shardsvrGetStatsForBalancing with scaleFactor 1). A shard removed meanwhile
// (ShardNotFound) is skipped; any other failure fails the round, as in MongoDB.
func (b *Balancer) dataSizes(ctx context.Context, shards []Shard, colls []collection) (map[string]map[string]int64, error) {
	arr := bsoncore.NewArrayBuilder()
	for _, c := range colls {
		arr.AppendDocument(bsoncore.NewDocumentBuilder().AppendString("ns", c.NS).AppendBinary("UUID", 4, c.UUID[:]).Build())
	}
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("_shardsvrGetStatsForBalancing", 1).
		AppendArray("collections", arr.Build()).AppendInt64("scaleFactor", 1).Build()
	replies := make([]bsoncore.Document, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() { replies[i], errs[i] = b.cfg.Shards.Run(ctx, s.ID, "admin", cmd) })
	}
	wg.Wait()
	out := map[string]map[string]int64{}
	for _, c := range colls {
		out[c.NS] = map[string]int64{}
	}
	for i, s := range shards {
		if mongoerr.Is(errs[i], mongoerr.ShardNotFound) {
			continue
		}
		if errs[i] != nil {
			return nil, fmt.Errorf("Failed to get stats for balancing from shard '%s': %w", s.ID, errs[i])
		}
		stats, _ := replies[i].Lookup("stats").ArrayOK()
		vals, _ := stats.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			ns, _ := d.Lookup("namespace").StringValueOK()
			size, ok := d.Lookup("collSize").AsInt64OK()
			if m := out[ns]; m != nil && ok {
				m[s.ID] = size
			}
		}
	}
	return out, nil
}

// move sends _shardsvrMoveRange to the donor's primary.
func (b *Balancer) move(ctx context.Context, c collection, m Migration, s Settings) error {
	// move_range_request.idl's ForceJumbo enum (a string; sharding/migration parses it).
	force := "doNotForce"
	if m.ForceJumbo {
		force = "forceBalancerMigration"
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrMoveRange", c.NS).
		AppendString("toShard", m.To).AppendDocument("min", m.Min).AppendDocument("max", m.Max).
		AppendBoolean("waitForDelete", s.WaitForDelete).
		AppendObjectID("epoch", c.Gen.Epoch).
		AppendTimestamp("collectionTimestamp", c.Gen.Timestamp.T, c.Gen.Timestamp.I).
		AppendString("fromShard", m.From).
		AppendInt64("maxChunkSizeBytes", c.maxChunkSizeBytes).
		AppendString("forceJumbo", force)
	if s.SecondaryThrottle != nil {
		// MigrationSecondaryThrottleOptions, as sharding/migration parses it.
		cmd.AppendDocument("secondaryThrottle", bsoncore.NewDocumentBuilder().
			AppendBoolean("_secondaryThrottle", *s.SecondaryThrottle).Build())
	}
	_, err := b.cfg.Shards.Run(ctx, m.From, "admin", cmd.Build())
	return err
}

// markJumbo sets jumbo: true on the chunk of c starting at min (majority).
func (b *Balancer) markJumbo(ctx context.Context, c collection, min bsoncore.Document) error {
	q := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, c.UUID[:]).AppendDocument("min", min).Build()
	u := bsoncore.NewDocumentBuilder().AppendDocument("$set", bsoncore.NewDocumentBuilder().AppendBoolean("jumbo", true).Build()).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("update", "chunks").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", q).AppendDocument("u", u).Build()).Build()).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	reply, err := b.cfg.Run(ctx, "config", cmd)
	if err != nil {
		return err
	}
	return writeError(reply)
}

// logRound records the round in config.actionlog (ShardingLogging::logAction
// "balancer.round"), creating the capped collection on first use. Best effort, as in MongoDB.
func (b *Balancer) logRound(ctx context.Context, start time.Time, res RoundResult, roundErr error) {
	create := bsoncore.NewDocumentBuilder().AppendString("create", "actionlog").AppendBoolean("capped", true).
		AppendInt64("size", actionLogSizeBytes).Build()
	if _, err := b.cfg.Run(ctx, "config", create); err != nil && !mongoerr.Is(err, mongoerr.NamespaceExists) {
		return
	}
	now := time.Now()
	details := bsoncore.NewDocumentBuilder().AppendInt64("executionTimeMillis", time.Since(start).Milliseconds()).
		AppendBoolean("errorOccurred", roundErr != nil)
	if roundErr != nil {
		details.AppendString("errmsg", roundErr.Error())
	} else {
		details.AppendInt32("candidateChunks", int32(res.Candidates)).AppendInt32("chunksMoved", int32(res.Moved))
	}
	doc := bsoncore.NewDocumentBuilder().
		AppendString("_id", fmt.Sprintf("%s-%s-%s", b.cfg.Host, now.UTC().Format("2006-01-02T15:04:05.000Z07:00"), bson.NewObjectID().Hex())).
		AppendString("server", b.cfg.Host).AppendString("shard", "config").AppendString("clientAddr", "").
		AppendDateTime("time", now.UnixMilli()).AppendString("what", "balancer.round").AppendString("ns", "").
		AppendDocument("details", details.Build()).Build()
	insert := bsoncore.NewDocumentBuilder().AppendString("insert", "actionlog").
		AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(doc).Build()).Build()
	if reply, err := b.cfg.Run(ctx, "config", insert); err == nil {
		err = writeError(reply)
		if err != nil {
			b.cfg.Log.Warn("Failed to log the balancer round", logv2.C(logv2.Sharding), logv2.ID(9130003), "error", err.Error())
		}
	}
}

// writeError turns a write reply's first writeError or writeConcernError into an error.
func writeError(reply bsoncore.Document) error { return configsvr.WriteReplyError(reply) }

// findOne runs a find on config.coll for one document.
func findOne(ctx context.Context, run RunFunc, coll string, filter bsoncore.Document) (bsoncore.Document, bool, error) {
	docs, err := findAll(ctx, run, coll, filter, nil)
	if err != nil || len(docs) == 0 {
		return nil, false, err
	}
	return docs[0], true, nil
}
