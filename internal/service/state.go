package service

import (
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/cursor"
	"humongo/internal/logv2"
	"humongo/internal/operation"
	"humongo/internal/repl/concern"
	"humongo/internal/repl/coord"
	"humongo/internal/sharding/shardstate"
	"humongo/internal/txn/lsc"
)

// State is the server-wide state handlers read and change (MongoDB's ServiceContext). The
// binary builds it once with NewState and hands it to the server, which fills the fields
// that depend on the listeners (Host, Port, Shutdown, ShutdownStarted) before it accepts
// connections.
type State struct {
	ProcessID bson.ObjectID
	StartTime time.Time
	// Host is "hostname:port" as serverStatus reports it; Port the bound port.
	Host string
	Port int
	Pid  int

	// DB is a data node's storage side (engine, catalog, collections, locks); nil on a
	// router and in servers started without storage (some protocol tests).
	DB *operation.DB

	// Repl is the replication coordinator of a replica-set member (--replSet); nil on a
	// standalone and on a router.
	Repl *coord.Coordinator

	// Sharding is a data node's sharded-cluster role and sharding state (--configsvr,
	// --shardsvr); nil outside a sharded cluster and on a router.
	Sharding *shardstate.State

	Params   *Params
	Log      *logv2.Sink
	Logger   *slog.Logger
	Sessions *lsc.Cache
	Counters Counters
	Clients  *Clients
	CmdLine  CmdLine
	// Compressors are the compressors the server accepts, in preference order.
	Compressors []string
	// MaxIncomingConnections is net.maxIncomingConnections.
	MaxIncomingConnections int
	// SlowOpThreshold is operationProfiling.slowOpThresholdMs.
	SlowOpThreshold time.Duration

	// Shutdown begins a clean shutdown (stop listening, drain, close storage) without waiting
	// for it; set by the server. timeout bounds the wait for in-flight operations.
	Shutdown func(force bool, timeout time.Duration)
	// ShutdownStarted is closed when shutdown begins: awaitable hellos stop waiting.
	ShutdownStarted <-chan struct{}

	// Auth is the server's authentication and authorization state (authn.go).
	Auth Auth
	// ClientSecurity is how this server's internal clients prove themselves to other cluster
	// members (TLS), nil when they connect plainly. The binary sets it (Config); clients that
	// dial through the replication coordinator's Rewriter get it from there.
	ClientSecurity *client.Security

	// Concern is the server's gossiped cluster time and its default read and write concern
	// (repl/concern; zero value ready).
	Concern concern.ServerState

	cursorsOnce sync.Once
	cursors     *cursor.Manager // see Cursors

	decoMu sync.Mutex
	decos  map[any]any // guarded by decoMu; see Decorate
}

// Decorate returns the value kept on this server under key, built by init on first use
// (MongoDB's ServiceContext decorations). Packages above this one keep their per-server state
// here instead of in package globals, so two servers in one process share nothing and the
// state goes away with the State. key is a comparable value private to its owner.
func (s *State) Decorate(key any, init func() any) any {
	s.decoMu.Lock()
	defer s.decoMu.Unlock()
	if v, ok := s.decos[key]; ok {
		return v
	}
	if s.decos == nil {
		s.decos = map[any]any{}
	}
	v := init()
	s.decos[key] = v
	return v
}

// Cursors returns the server's cursor manager, built on first use. Its idle timeout follows
// the cursorTimeoutMillis parameter and it keeps serverStatus metrics.cursor (Counters) up
// to date. The role closes it at shutdown, before storage closes under its cursors.
func (s *State) Cursors() *cursor.Manager {
	s.cursorsOnce.Do(func() {
		c := &s.Counters
		s.cursors = cursor.NewManager(cursor.Options{
			Timeout: func() time.Duration {
				if s.Params == nil {
					return 10 * time.Minute
				}
				return time.Duration(s.Params.Int("cursorTimeoutMillis")) * time.Millisecond
			},
			Metrics: cursor.Metrics{
				Open: &c.CursorsOpenTotal, OpenNoTimeout: &c.CursorsOpenNoTimeout,
				OpenPinned: &c.CursorsOpenPinned, TimedOut: &c.CursorsTimedOut, TotalOpened: &c.CursorsTotalOpened,
			},
		})
	})
	return s.cursors
}

// CmdLine is what getCmdLineOpts reports.
type CmdLine struct {
	Argv   []string
	Parsed bsoncore.Document
}

// Counters are serverStatus counters. All fields are updated atomically.
type Counters struct {
	// opcounters
	Insert, Query, Update, Delete, GetMore, Command atomic.Int64
	// network
	BytesIn, BytesOut, NumRequests atomic.Int64
	// connections.totalCreated
	ConnsCreated atomic.Int64
	// metrics.document
	DocsDeleted, DocsInserted, DocsReturned, DocsUpdated atomic.Int64
	// metrics.cursor
	CursorsTimedOut, CursorsOpenNoTimeout, CursorsOpenPinned, CursorsOpenTotal, CursorsTotalOpened atomic.Int64
	// asserts: commands that failed with a user error (uassert) or an internal one
	AssertsUser, AssertsRegular atomic.Int64
}

// OpCounter returns the opcounters field named name ("insert", "query", ...).
func (c *Counters) OpCounter(name string) *atomic.Int64 {
	switch name {
	case "insert":
		return &c.Insert
	case "query":
		return &c.Query
	case "update":
		return &c.Update
	case "delete":
		return &c.Delete
	case "getmore":
		return &c.GetMore
	}
	return &c.Command
}

// Config is what NewState needs; zero values mean mongod's defaults.
type Config struct {
	// Params is the server parameter registry (required: each role declares its own).
	Params *Params
	// Logger receives logv2-style records; LogSink is its handler's sink (for getLog). When
	// Logger is nil, a logv2 handler writing nowhere but its rings is created.
	Logger  *slog.Logger
	LogSink *logv2.Sink
	CmdLine CmdLine
	// Compressors the server accepts, in preference order (default snappy, zstd, zlib).
	Compressors []string
	// MaxIncomingConnections caps open connections (default 1000000, mongod's).
	MaxIncomingConnections int
	// SlowOpThreshold: commands slower than this are logged (default 100 ms).
	SlowOpThreshold time.Duration
	// ClientSecurity is State.ClientSecurity.
	ClientSecurity *client.Security
}

// NewState builds the server-wide state of one process: a fresh process id, the logical
// session cache sized by the localLogicalSessionTimeoutMinutes and maxSessions parameters
// (declared by every role), and an empty client registry.
func NewState(cfg Config) *State {
	if cfg.Logger == nil {
		h := logv2.NewHandler(nil, nil)
		cfg.Logger, cfg.LogSink = slog.New(h), h.Sink()
	}
	if cfg.Compressors == nil {
		cfg.Compressors = []string{"snappy", "zstd", "zlib"}
	}
	if cfg.MaxIncomingConnections <= 0 {
		cfg.MaxIncomingConnections = 1000000
	}
	if cfg.SlowOpThreshold <= 0 {
		cfg.SlowOpThreshold = 100 * time.Millisecond
	}
	wireLogParams(cfg.Params, cfg.LogSink)
	timeout := time.Duration(cfg.Params.Int("localLogicalSessionTimeoutMinutes")) * time.Minute
	st := &State{
		ProcessID:              bson.NewObjectID(),
		StartTime:              time.Now(),
		Pid:                    os.Getpid(),
		Params:                 cfg.Params,
		Log:                    cfg.LogSink,
		Logger:                 cfg.Logger,
		Sessions:               lsc.New(timeout, int(cfg.Params.Int("maxSessions")), nil),
		Clients:                NewClients(),
		CmdLine:                cfg.CmdLine,
		Compressors:            cfg.Compressors,
		MaxIncomingConnections: cfg.MaxIncomingConnections,
		SlowOpThreshold:        cfg.SlowOpThreshold,
		ClientSecurity:         cfg.ClientSecurity,
	}
	// Connections read the server's authorization state (Conn.IsInternal).
	st.Clients.auth = &st.Auth
	FollowClockParams(st)
	return st
}

// wireLogParams makes the log sink follow the maxLogSizeKB and logLevel server parameters
// (set at startup or at runtime), when the role declares them.
func wireLogParams(params *Params, sink *logv2.Sink) {
	if sink == nil {
		return
	}
	if _, ok := params.Spec("maxLogSizeKB"); ok {
		sink.SetMaxAttributeSizeKB(func() int64 { return params.Int("maxLogSizeKB") })
	}
	if _, ok := params.Spec("logLevel"); ok {
		sink.SetVerbosity(func() int64 { return params.Int("logLevel") })
	}
}
