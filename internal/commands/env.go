package commands

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/txn/lsc"
)

// Env is what a handler knows about the request beyond the command body.
type Env struct {
	// DB is the command's `$db`.
	DB string
	// Name is the command name as the client spelled it (an alias possibly).
	Name    string
	Command *Command
	Conn    *Conn
	State   *State
	// Op is the in-progress operation record (currentOp/killOp).
	Op *Op
	// Legacy is true when the command arrived in an OP_QUERY.
	Legacy bool
	// ExhaustAllowed is the client's OP_MSG exhaustAllowed bit.
	ExhaustAllowed bool
	// Exhaust may be set by a handler, only when ExhaustAllowed, to stream: the server sends
	// the reply with moreToCome and runs the same command again on the same connection until a
	// run leaves Exhaust false, fails, or the connection closes. Awaitable hello uses this; a
	// getMore on an exhaust cursor will too.
	Exhaust bool
}

// State is the server-wide state commands read and change. The server builds it once.
type State struct {
	ProcessID bson.ObjectID
	StartTime time.Time
	// Host is "hostname:port" as serverStatus reports it; Port the bound port.
	Host string
	Port int
	Pid  int

	// DB is the storage side (engine, catalog, collections, locks); nil in servers started
	// without storage (some protocol tests).
	DB *operation.DB

	// Repl is the replication coordinator of a replica-set member (--replSet); nil on a
	// standalone.
	Repl *coord.Coordinator

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

	// local is this server's own command-layer state (issue 9: these were package globals
	// keyed by *State). Its zero value is ready; see server_local.go.
	local serverLocal
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

// Conn is the per-connection state. The connection's own goroutine is the only writer of the
// unexported fields apart from mu-guarded ones, which currentOp reads from other goroutines.
type Conn struct {
	ID       int64
	Remote   string // client "host:port"
	Local    string // server "host:port" the client connected to
	Loopback bool   // the client is on a loopback address
	Created  time.Time

	mu          sync.Mutex
	metaSet     bool              // a hello has been processed (client metadata is now fixed)
	meta        bsoncore.Document // hello.client, nil when not sent
	appName     string
	compressors []string
	op          *Op // the running operation, nil when idle
	internal    bool
}

// Desc is the connection's log context name, "conn<N>".
func (c *Conn) Desc() string { return "conn" + itoa(c.ID) }

// ClientMetadata returns the hello.client document (nil if none) and the application name.
func (c *Conn) ClientMetadata() (bsoncore.Document, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta, c.appName
}

// AppName returns client.application.name from the first hello.
func (c *Conn) AppName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appName
}

// Compressors returns the compressors negotiated by hello.
func (c *Conn) Compressors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compressors
}

// IsInternal reports whether the client declared itself an internal client (another node).
func (c *Conn) IsInternal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.internal
}

// Op is one in-progress operation.
type Op struct {
	ID    int64
	Conn  *Conn
	Name  string
	NS    string
	Cmd   bsoncore.Document // a copy, valid after the request buffer is reused
	Start time.Time

	cancel context.CancelCauseFunc
	killed atomic.Bool
}

// Killed reports whether killOp (or shutdown) interrupted the op.
func (o *Op) Killed() bool { return o.killed.Load() }

// Clients is the registry of open connections and their running operations.
type Clients struct {
	mu     sync.Mutex
	conns  map[int64]*Conn
	nextID atomic.Int64 // connection ids
	nextOp atomic.Int64 // operation ids
}

// NewClients returns an empty registry.
func NewClients() *Clients { return &Clients{conns: map[int64]*Conn{}} }

// NewConn registers a new connection and gives it the next id.
func (cl *Clients) NewConn(remote, local string, loopback bool) *Conn {
	c := &Conn{ID: cl.nextID.Add(1), Remote: remote, Local: local, Loopback: loopback, Created: time.Now()}
	cl.mu.Lock()
	cl.conns[c.ID] = c
	cl.mu.Unlock()
	return c
}

// Remove unregisters a closed connection.
func (cl *Clients) Remove(c *Conn) {
	cl.mu.Lock()
	delete(cl.conns, c.ID)
	cl.mu.Unlock()
}

// Len returns the number of open connections and how many run an operation right now.
func (cl *Clients) Len() (current, active int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, c := range cl.conns {
		c.mu.Lock()
		if c.op != nil {
			active++
		}
		c.mu.Unlock()
	}
	return len(cl.conns), active
}

// Conns returns the open connections ordered by id.
func (cl *Clients) Conns() []*Conn {
	cl.mu.Lock()
	out := make([]*Conn, 0, len(cl.conns))
	for _, c := range cl.conns {
		out = append(out, c)
	}
	cl.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// BeginOp records that conn starts running the command and returns the op and a context that
// killOp cancels. cmd is copied. The caller must call EndOp.
func (cl *Clients) BeginOp(ctx context.Context, conn *Conn, name, db string, cmd bsoncore.Document) (*Op, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	op := &Op{
		ID: cl.nextOp.Add(1), Conn: conn, Name: name, NS: db + ".$cmd",
		Cmd: append(bsoncore.Document(nil), cmd...), Start: time.Now(), cancel: cancel,
	}
	conn.mu.Lock()
	conn.op = op
	conn.mu.Unlock()
	return op, ctx
}

// EndOp clears the connection's running op and releases its context.
func (cl *Clients) EndOp(op *Op) {
	op.Conn.mu.Lock()
	if op.Conn.op == op {
		op.Conn.op = nil
	}
	op.Conn.mu.Unlock()
	op.cancel(nil)
}

// Kill interrupts the operation with id opID with cause (Interrupted for killOp). It reports
// whether such an operation was running.
func (cl *Clients) Kill(opID int64, cause error) bool {
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op != nil && op.ID == opID {
			op.kill(cause)
			return true
		}
	}
	return false
}

// KillAll interrupts every running operation (shutdown).
func (cl *Clients) KillAll(cause error) {
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op != nil {
			op.kill(cause)
		}
	}
}

func (o *Op) kill(cause error) {
	o.killed.Store(true)
	o.cancel(cause)
}

// ErrInterrupted is the cause killOp gives an operation's context.
func ErrInterrupted() error { return mongoerr.New(mongoerr.Interrupted, "operation was interrupted") }

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
