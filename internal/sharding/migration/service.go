package migration

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/filtering"
)

// RunFunc runs one command (an error for ok: 0, with the remote code and message).
type RunFunc func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)

// Cluster is what a shard's migrations need from the rest of the cluster.
type Cluster interface {
	// RunOnShard runs cmd on shard id's primary.
	RunOnShard(ctx context.Context, id, db string, cmd bsoncore.Document) (bsoncore.Document, error)
	// RunOnConfig runs cmd on the config server's primary.
	RunOnConfig(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)
	// ShardHost returns shard id's connection string (ShardNotFound when there is none).
	ShardHost(ctx context.Context, id string) (string, error)
}

// RangeDeleter is what migrations need of the shard's range deleter (rangedel.Service).
type RangeDeleter interface {
	// Kick wakes the deleter: a task became ready.
	Kick()
}

// Service is one shard node's migrations: its registry, the donor's active cloner, the
// recipient's active session, and the change tracker its write path feeds.
type Service struct {
	Self      func() string
	Local     *Local
	Filtering *filtering.Runtime
	Cluster   Cluster
	// LocalRun runs a command on this node in-process (config.migrationCoordinators and
	// config.rangeDeletions writes).
	LocalRun RunFunc
	// WaitMajority waits until this node's last write is majority-committed.
	WaitMajority func(ctx context.Context) error
	// WaitWriteConcern waits for this node's last write to satisfy the secondaryThrottle
	// write concern wc (nil: the migration default); nil: no throttling.
	WaitWriteConcern func(ctx context.Context, wc bsoncore.Document) error
	// ValidAfter is the cluster time a commit's chunk history starts at.
	ValidAfter func(ctx context.Context) bson.Timestamp
	// EnsureCollection creates ns locally with uuid, options and indexes (the donor's)
	// unless it exists, and creates the indexes it lacks.
	EnsureCollection func(ctx context.Context, ns string, uuid catalog.UUID, options bsoncore.Document, indexes []bsoncore.Document) error
	// ConfigTime, ConfigConnString and AdvanceConfigTime serve minOpTimeRecovery: the
	// node's config time, its config servers' connection string, and raising the config
	// time at recovery (nil: no minOpTimeRecovery document is kept).
	ConfigTime        func() bson.Timestamp
	ConfigConnString  func() string
	AdvanceConfigTime func(t, i uint32)
	// RangeDeleter is the shard's range deleter, nil when it runs none (tests): woken when
	// a task becomes ready. RangeDeleterWait bounds the recipient's wait for overlapping
	// range deletions (receiveChunkWaitForRangeDeleterTimeoutMS; 10 s when nil).
	RangeDeleter     func() RangeDeleter
	RangeDeleterWait func() time.Duration
	// OtherBound is computeOtherBound for a moveRange without max: the key that ends a range
	// of about maxBytes from min inside [min, chunkMax), nil when the rest of the chunk is
	// smaller (nil OtherBound: the range goes to the chunk's end).
	OtherBound func(ctx context.Context, ns string, keyPattern, min, chunkMax bsoncore.Document, maxBytes int64) (bsoncore.Document, error)
	// Term returns the node's replication term (the session catalog's validity; nil: 0).
	Term func() int64
	Log  *slog.Logger

	Registry Registry
	Stats    Statistics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cloner *Cloner
	dest   *Destination
	closed bool

	changelogReady atomic.Bool // config.changelog is known to exist (logChange)
}

// Init prepares the service's background context (call once before use).
func (s *Service) Init() {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.Log == nil {
		s.Log = slog.Default()
	}
}

// Close stops the recipient's session, if any, and waits for the service's goroutines.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// go runs f in a goroutine owned by the service (stopped by Close through ctx).
func (s *Service) spawn(f func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return mongoerr.New(mongoerr.ShutdownInProgress, "the server is shutting down")
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
	return nil
}

// activeCloner returns the donor's cloner of sessionID (ns checked too).
func (s *Service) activeCloner(ns, sessionID string) (*Cloner, error) {
	s.mu.Lock()
	c := s.cloner
	s.mu.Unlock()
	if c == nil || (sessionID != "" && c.SessionID != sessionID) || (ns != "" && c.NS != ns) {
		return nil, mongoerr.Newf(mongoerr.NotYetInitialized, "No active migration session %s for %s", sessionID, ns)
	}
	return c, nil
}

// MigrateClone serves _migrateClone.
func (s *Service) MigrateClone(ctx context.Context, ns, sessionID string) ([]bsoncore.Document, error) {
	c, err := s.activeCloner(ns, sessionID)
	if err != nil {
		return nil, err
	}
	return c.MigrateCloneBatch(ctx, s.Local)
}

// TransferMods serves _transferMods.
func (s *Service) TransferMods(ctx context.Context, ns, sessionID string) ([]bsoncore.Value, []bsoncore.Document, error) {
	c, err := s.activeCloner(ns, sessionID)
	if err != nil {
		return nil, nil, err
	}
	return c.TransferMods(ctx, s.Local)
}
