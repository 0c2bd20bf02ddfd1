package ddl

// The ChunkSplitter (spec: sharding.md "Auto-splitting", "Deciding when to auto-split a
// chunk", "The auto split task", "Top Chunk Optimization"; MongoDB 4.4's chunk_splitter.cpp
// and ChunkWritesTracker, splitOrMarkJumbo for chunks of one key value): a shard primary
// counts the bytes that routed inserts and updates write into each chunk it owns; when a
// chunk has taken half the configured chunk size, one split task for it runs in the
// background (never two for one chunk): splitVector picks the points (the first or last
// key instead for the collection's first or last chunk of a ranged key), the config server
// commits the split, the shard refreshes its filtering metadata and the pieces start
// counting from the bytes written during the task. A chunk of a single key value cannot be
// split: it is marked jumbo on the config server and never tried again.

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/logv2"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// DefaultChunkSizeMB is config.settings' chunksize when none is set (128 MB since 6.0).
const DefaultChunkSizeMB = 128

// settingsTTL is how long the splitter trusts the config server's settings it last read.
const settingsTTL = time.Second

// SplitterConfig is what a ChunkSplitter needs of its node.
type SplitterConfig struct {
	Local  RunFunc                 // this node's commands (splitVector's scans)
	Remote func() (*Remote, error) // the cluster (settings, the split commit, jumbo marks)
	// Metadata is the shard's filtering metadata of ns: its routing table (nil when
	// unknown or unsharded) and this shard's id.
	Metadata func(ns string) (*routing.RoutingTable, string)
	// Refresh reloads ns's filtering metadata from the config server after a split.
	Refresh func(ctx context.Context, ns string) error
	// IsPrimary reports whether this node is the writable primary (only it splits).
	IsPrimary func() bool
	// Guard holds ns against a migration out of it for the split (the shard's
	// ActiveMigrationsRegistry); nil: nothing to serialize with.
	Guard func(ctx context.Context, ns string) (release func(), err error)
	Log   *slog.Logger
}

// ChunkSplitter tracks writes per chunk and runs auto-split tasks. Safe for concurrent use;
// Close stops its tasks and waits for them.
type ChunkSplitter struct {
	cfg    SplitterConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	trackers map[string]*writesTracker // by chunkID
	jumbo    map[string]bool           // chunks marked jumbo by this node
	settings splitSettings
	fetching bool
	closed   bool
}

// writesTracker is ChunkWritesTracker: the bytes written to a chunk since its last split
// attempt, and whether a split task holds it (the lock: no second task for the chunk).
type writesTracker struct {
	bytes     int64
	splitting bool
}

type splitSettings struct {
	fetched     time.Time
	chunkBytes  int64
	autoSplitOn bool
	// collBytes are the collections' own max chunk sizes (config.collections
	// maxChunkSizeBytes, set by configureCollectionBalancing), overriding chunkBytes.
	collBytes map[string]int64
}

// chunkBytesFor is ns's max chunk size.
func (set splitSettings) chunkBytesFor(ns string) int64 {
	if b, ok := set.collBytes[ns]; ok && b > 0 {
		return b
	}
	return set.chunkBytes
}

// NewChunkSplitter returns a splitter; Close stops it.
func NewChunkSplitter(cfg SplitterConfig) *ChunkSplitter {
	ctx, cancel := context.WithCancel(context.Background())
	return &ChunkSplitter{cfg: cfg, ctx: ctx, cancel: cancel, trackers: map[string]*writesTracker{}, jumbo: map[string]bool{}}
}

// Close cancels the running tasks and waits for them; later writes are not tracked.
func (s *ChunkSplitter) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func chunkID(ns string, min, max bsoncore.Document) string {
	return ns + "\x00" + string(min) + "\x00" + string(max)
}

// NoteWrites records that a routed write put bytes into the chunk holding each key of ns
// (keys[i] and bytes[i]), and schedules the split of a chunk that has taken half the chunk
// size. Keys of chunks this shard does not own, or of jumbo chunks, are ignored.
func (s *ChunkSplitter) NoteWrites(ns string, keys []bsoncore.Document, bytes []int64) {
	if s == nil || len(keys) == 0 || (s.cfg.IsPrimary != nil && !s.cfg.IsPrimary()) {
		return
	}
	table, self := s.cfg.Metadata(ns)
	if table == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	set := s.currentSettings()
	for i, key := range keys {
		chunk, err := table.ChunkForKey(key)
		if err != nil || chunk.Shard != self || chunk.Jumbo {
			continue
		}
		id := chunkID(ns, chunk.Min, chunk.Max)
		if s.jumbo[jumboID(id, chunk.Version)] {
			continue
		}
		t := s.trackers[id]
		if t == nil {
			t = &writesTracker{}
			s.trackers[id] = t
		}
		t.bytes += bytes[i]
		chunkBytes := set.chunkBytesFor(ns)
		if set.fetched.IsZero() || !set.autoSplitOn || t.splitting || t.bytes < chunkBytes/2 {
			continue
		}
		// The task holds the tracker; writes during it count from zero again and seed
		// the pieces' estimates.
		t.splitting, t.bytes = true, 0
		c := *chunk
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.split(ns, table, c, id, chunkBytes)
		}()
	}
}

// currentSettings returns the cached settings, fetching them in the background when they
// are older than settingsTTL (s.mu held).
func (s *ChunkSplitter) currentSettings() splitSettings {
	if !s.fetching && time.Since(s.settings.fetched) > settingsTTL {
		s.fetching = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			set, err := s.fetchSettings(s.ctx)
			s.mu.Lock()
			defer s.mu.Unlock()
			s.fetching = false
			if err == nil {
				s.settings = set
			} else if s.cfg.Log != nil && s.ctx.Err() == nil {
				s.cfg.Log.Warn("Could not read the auto-split settings", logv2.C(logv2.Sharding), "error", err.Error())
			}
		}()
	}
	return s.settings
}

// fetchSettings reads config.settings' chunksize (MB) and autosplit documents.
func (s *ChunkSplitter) fetchSettings(ctx context.Context) (splitSettings, error) {
	set := splitSettings{chunkBytes: DefaultChunkSizeMB << 20, autoSplitOn: true}
	remote, err := s.cfg.Remote()
	if err != nil {
		return set, err
	}
	ids := bsoncore.NewArrayBuilder().AppendString("chunksize").AppendString("autosplit").Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "settings").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendDocument("_id",
			bsoncore.NewDocumentBuilder().AppendArray("$in", ids).Build()).Build()).Build()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reply, err := Run(ctx, remote.Config(), "config", cmd)
	if err != nil {
		return set, err
	}
	batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := batch.Values()
	for _, v := range vals {
		d, _ := v.DocumentOK()
		switch id, _ := d.Lookup("_id").StringValueOK(); id {
		case "chunksize":
			if mb, ok := bsonutil.ToFloat64(d.Lookup("value")); ok && mb >= 1 && mb <= 1024 {
				set.chunkBytes = int64(mb) << 20
			}
		case "autosplit":
			if on, ok := d.Lookup("enabled").BooleanOK(); ok {
				set.autoSplitOn = on
			}
		}
	}
	cmd = bsoncore.NewDocumentBuilder().AppendString("find", "collections").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendDocument("maxChunkSizeBytes",
			bsoncore.NewDocumentBuilder().AppendBoolean("$exists", true).Build()).Build()).
		AppendDocument("projection", bsoncore.NewDocumentBuilder().AppendInt32("maxChunkSizeBytes", 1).Build()).
		AppendInt32("batchSize", 10000).Build()
	reply, err = Run(ctx, remote.Config(), "config", cmd)
	if err != nil {
		return set, err
	}
	batch, _ = reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ = batch.Values()
	for _, v := range vals {
		d, _ := v.DocumentOK()
		ns, _ := d.Lookup("_id").StringValueOK()
		if b, ok := d.Lookup("maxChunkSizeBytes").AsInt64OK(); ok && b > 0 {
			if set.collBytes == nil {
				set.collBytes = map[string]int64{}
			}
			set.collBytes[ns] = b
		}
	}
	set.fetched = time.Now()
	return set, nil
}

// split is one auto-split task for chunk (whose tracker is id's, held by the task).
func (s *ChunkSplitter) split(ns string, table *routing.RoutingTable, chunk routing.Chunk, id string, chunkBytes int64) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	release := func() {
		s.mu.Lock()
		if t := s.trackers[id]; t != nil {
			t.splitting = false
		}
		s.mu.Unlock()
	}
	p := table.Pattern()
	pts, err := SplitVector(ctx, s.cfg.Local, s.cfg.Log, SplitVectorRequest{NS: ns, KeyPattern: p.Doc(),
		Min: chunk.Min, Max: chunk.Max, MaxChunkSizeBytes: chunkBytes})
	if err != nil {
		s.logFailure(ns, chunk, err)
		release()
		return
	}
	if pts.SingleKey {
		s.markJumbo(ctx, ns, table, chunk, id)
		return
	}
	if len(pts.Keys) == 0 {
		release()
		return
	}
	keys := pts.Keys
	// Top chunk optimisation: the first or last chunk of a ranged key is likely to take
	// more monotonic inserts, so it is split at its lowest (second) or highest key instead,
	// leaving the hot end in a chunk of one document.
	top := false
	if p.HashedField() < 0 {
		if bsonutil.CompareDocuments(chunk.Min, p.GlobalMin()) == 0 {
			if k, err := s.extremeKey(ctx, ns, p, chunk, true); err == nil && k != nil {
				keys[0], top = k, true
			}
		} else if bsonutil.CompareDocuments(chunk.Max, p.GlobalMax()) == 0 {
			if k, err := s.extremeKey(ctx, ns, p, chunk, false); err == nil && k != nil {
				keys[len(keys)-1], top = k, true
			}
		}
		keys = strictlyIncreasing(keys, chunk.Min)
	}
	err = s.commitSplit(ctx, ns, SplitRequest{NS: ns, KeyPattern: p.Doc(), Gen: table.Generation(),
		Min: chunk.Min, Max: chunk.Max, SplitKeys: keys, HasGenTimes: true})
	if err != nil {
		// Most likely the chunk changed under this node's metadata (split or moved): the
		// tracker goes and the metadata is reloaded, so that writes count in the chunks
		// that exist now.
		s.logFailure(ns, chunk, err)
		s.mu.Lock()
		delete(s.trackers, id)
		s.mu.Unlock()
		if rerr := s.cfg.Refresh(ctx, ns); rerr != nil {
			s.logFailure(ns, chunk, rerr)
		}
		return
	}
	if s.cfg.Log != nil {
		s.cfg.Log.Info("Auto-split chunk", logv2.C(logv2.Sharding), "namespace", ns, "chunk", chunk.RangeString(),
			"splitPoints", len(keys), "topChunk", top)
	}
	if err := s.cfg.Refresh(ctx, ns); err != nil {
		s.logFailure(ns, chunk, err)
	}
	// The pieces start from what was written to the chunk during the task.
	s.mu.Lock()
	written := int64(0)
	if t := s.trackers[id]; t != nil {
		written = t.bytes
	}
	delete(s.trackers, id)
	bounds := append(append([]bsoncore.Document{chunk.Min}, keys...), chunk.Max)
	for i := 0; i+1 < len(bounds); i++ {
		s.trackers[chunkID(ns, bounds[i], bounds[i+1])] = &writesTracker{bytes: written}
	}
	s.mu.Unlock()
	// MongoDB's ChunkSplitter now moves the top chunk off this shard when top is set (the
	// balancer's moveRange through _shardsvrMoveRange); migrations are not this package's.
}

// strictlyIncreasing drops keys not above the previous one (a top-chunk key can land on or
// before a neighbouring split point).
func strictlyIncreasing(keys []bsoncore.Document, min bsoncore.Document) []bsoncore.Document {
	out := keys[:0]
	prev := min
	for _, k := range keys {
		if bsonutil.CompareDocuments(k, prev) > 0 {
			out = append(out, k)
			prev = k
		}
	}
	return out
}

// extremeKey is findExtremeKeyInRange: the second key of the range (lower: the first piece
// keeps one document) or its last key.
func (s *ChunkSplitter) extremeKey(ctx context.Context, ns string, p *shardkey.Pattern, chunk routing.Chunk, lower bool) (bsoncore.Document, error) {
	db, coll, _ := strings.Cut(ns, ".")
	docs, err := cursorAll(ctx, s.cfg.Local, db, coll, bsoncore.NewDocumentBuilder().AppendString("listIndexes", coll).Build())
	if err != nil {
		return nil, err
	}
	specs := make([]IndexSpec, len(docs))
	for i, d := range docs {
		specs[i] = ParseIndexSpec(d)
	}
	ix, ok := shardKeyIndex(p, specs)
	if !ok {
		return nil, nil
	}
	b := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendDocument("hint", ix.Key).
		AppendDocument("min", ExtendRangeBound(ix.Key, chunk.Min, false)).
		AppendDocument("max", ExtendRangeBound(ix.Key, chunk.Max, false)).AppendBoolean("returnKey", true)
	if lower {
		b.AppendInt32("limit", 2).AppendBoolean("singleBatch", true)
	} else {
		b.AppendInt32("batchSize", 10000)
	}
	var n int
	var key bsoncore.Document
	err = scanCursor(ctx, s.cfg.Local, db, coll, b.Build(), func(d bsoncore.Document) bool {
		n++
		key = d
		return !lower || n < 2
	})
	if err != nil || (lower && n < 2) || key == nil {
		return nil, err
	}
	return shardKeyOfIndexKey(p, key), nil
}

// markJumbo is splitOrMarkJumbo's jumbo branch: the chunk holds one key value, so it is
// flagged jumbo in config.chunks (without a version bump, as MongoDB does) and never tried
// again by this node at this version (clearJumboFlag bumps it, making it eligible again).
func (s *ChunkSplitter) markJumbo(ctx context.Context, ns string, table *routing.RoutingTable, chunk routing.Chunk, id string) {
	s.mu.Lock()
	s.jumbo[jumboID(id, chunk.Version)] = true
	delete(s.trackers, id)
	s.mu.Unlock()
	if s.cfg.Log != nil {
		s.cfg.Log.Info("Marking chunk as jumbo", logv2.C(logv2.Sharding), logv2.ID(21873), "namespace", ns, "chunk", chunk.RangeString())
	}
	fail := func(why string) {
		if s.cfg.Log != nil {
			s.cfg.Log.Warn("Couldn't mark chunk as jumbo", logv2.C(logv2.Sharding), logv2.ID(21874), "namespace", ns,
				"minKey", bsonutil.FormatDoc(chunk.Min), "error", why)
		}
	}
	remote, err := s.cfg.Remote()
	if err != nil {
		fail(err.Error())
		return
	}
	uuid := table.UUID()
	q := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, uuid[:]).AppendDocument("min", chunk.Min).
		AppendDocument("max", chunk.Max).AppendString("shard", chunk.Shard).Build()
	u := bsoncore.NewDocumentBuilder().AppendDocument("$set", bsoncore.NewDocumentBuilder().AppendBoolean("jumbo", true).Build()).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("update", "chunks").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", q).AppendDocument("u", u).Build()).Build()).
		AppendDocument("writeConcern", majority()).Build()
	reply, err := Run(ctx, remote.Config(), "config", cmd)
	if err != nil {
		fail(err.Error())
		return
	}
	if we, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		if vals, _ := we.Values(); len(vals) > 0 {
			fail(vals[0].String())
		}
	}
}

func jumboID(id string, v routing.ChunkVersion) string {
	return id + "\x00" + v.String()
}

func (s *ChunkSplitter) logFailure(ns string, chunk routing.Chunk, err error) {
	if s.cfg.Log != nil && s.ctx.Err() == nil {
		s.cfg.Log.Warn("Unable to auto-split chunk", logv2.C(logv2.Sharding), logv2.ID(21906), "namespace", ns,
			"chunk", chunk.RangeString(), "error", err.Error())
	}
}

// ShardKeyOfEquality is the shard key an update's query pins by equality on every shard key
// field (hashed fields hashed), as the router targets it; ok is false otherwise.
func ShardKeyOfEquality(p *shardkey.Pattern, q bsoncore.Document) (bsoncore.Document, bool) {
	vals := make([]bsoncore.Value, 0, p.NumFields())
	for i, f := range p.Fields() {
		v, err := q.LookupErr(f)
		if err != nil {
			if !strings.Contains(f, ".") {
				return nil, false
			}
			if v, err = bsoncore.Document(q).LookupErr(strings.Split(f, ".")...); err != nil {
				return nil, false
			}
		}
		if d, ok := v.DocumentOK(); ok {
			if e, err := d.IndexErr(0); err == nil && strings.HasPrefix(e.Key(), "$") {
				return nil, false
			}
		}
		if v.Type == bsoncore.TypeArray || v.Type == bsoncore.TypeRegex {
			return nil, false
		}
		if i == p.HashedField() {
			h, err := shardkey.HashValue(v)
			if err != nil {
				return nil, false
			}
			v = h
		}
		vals = append(vals, v)
	}
	return p.KeyFromValues(vals...), true
}

// commitSplit asks the config server to split r's chunk of this shard, holding ns against a
// migration out of it meanwhile (Guard): a chunk moving while it splits would have the
// migration commit bounds that no longer exist.
func (s *ChunkSplitter) commitSplit(ctx context.Context, ns string, r SplitRequest) error {
	if s.cfg.Guard != nil {
		release, err := s.cfg.Guard(ctx, ns)
		if err != nil {
			return err
		}
		defer release()
	}
	remote, err := s.cfg.Remote()
	if err != nil {
		return err
	}
	_, self := s.cfg.Metadata(ns)
	r.From = self
	_, err = SplitChunk(ctx, remote, self, r)
	return err
}
