package service

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/txn/lsc"
)

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
	op          *Op            // the running operation, nil when idle
	internal    bool           // the handshake claimed a member's internal client (see IsInternal)
	authUser    *auth.UserName // the authenticated user, nil when none
	sasl        *saslState     // the SASL conversation in progress, nil when none

	// serverAuth is the server's authentication state (nil for connections made outside a
	// server's Clients, as some tests do): under authorization, IsInternal needs __system.
	serverAuth *Auth
}

// AuthUser returns the user the connection authenticated as (nil when none).
func (c *Conn) AuthUser() *auth.UserName {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authUser
}

// Users are the connection's authenticated users as a list (at most one; none when
// unauthenticated): what owns its operations for currentOp's $ownOps and killOp.
func (c *Conn) Users() []auth.UserName {
	if u := c.AuthUser(); u != nil {
		return []auth.UserName{*u}
	}
	return nil
}

func (c *Conn) setAuthUser(u *auth.UserName) {
	c.mu.Lock()
	c.authUser = u
	c.mu.Unlock()
}

// Desc is the connection's log context name, "conn<N>".
func (c *Conn) Desc() string { return "conn" + strconv.FormatInt(c.ID, 10) }

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

// Snapshot returns the running operation (nil when idle), the hello.client document and the
// application name, read together (currentOp).
func (c *Conn) Snapshot() (op *Op, meta bsoncore.Document, appName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.op, c.meta, c.appName
}

// ClientMetadata is what the first hello fixes for a connection's life.
type ClientMetadata struct {
	// Set: a hello has been processed (the metadata can no longer change).
	Set      bool
	Doc      bsoncore.Document // hello.client, nil when not sent
	AppName  string
	Internal bool // the client declared itself an internal client (another node)
}

// UpdateMetadata runs update on the connection's metadata under its lock, so a hello's
// check-then-set cannot interleave with another reader.
func (c *Conn) UpdateMetadata(update func(m *ClientMetadata) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := ClientMetadata{Set: c.metaSet, Doc: c.meta, AppName: c.appName, Internal: c.internal}
	if err := update(&m); err != nil {
		return err
	}
	c.metaSet, c.meta, c.appName, c.internal = m.Set, m.Doc, m.AppName, m.Internal
	return nil
}

// SetCompressors records the compressors hello negotiated.
func (c *Conn) SetCompressors(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.compressors = names
}

// Compressors returns the compressors negotiated by hello.
func (c *Conn) Compressors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compressors
}

// IsInternal reports whether the connection is another node's internal client: its
// handshake said so (hello's internalClient, or vclock.MemberDriverName) and, when the server
// runs with authorization, it authenticated as the keyfile's __system user. Anyone can send
// the handshake; under authorization only the keyfile proves membership, which lets a member
// send $configTime and $topologyTime and skips the checks meant for drivers.
func (c *Conn) IsInternal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.internal {
		return false
	}
	if c.serverAuth == nil || !c.serverAuth.Enabled {
		return true
	}
	return c.authUser != nil && *c.authUser == internalUser
}

// Op is one in-progress operation.
type Op struct {
	ID    int64
	Conn  *Conn
	Name  string
	NS    string
	Cmd   bsoncore.Document // a copy, valid after the request buffer is reused
	Start time.Time
	// Session is the command's logical session (its lsid), when InSession: killSessions and
	// the session cache's refresh find the session's operations by it.
	Session   lsc.Key
	InSession bool

	cancel context.CancelCauseFunc
	killed atomic.Bool

	// Stats are the running command's yields and lock waits, for currentOp and
	// serverStatus.globalLock.
	Stats operation.OpStats
	ns    atomic.Pointer[string]
}

// SetNS sets the namespace currentOp reports once the command knows it (a collection's
// "db.coll" instead of "db.$cmd").
func (o *Op) SetNS(ns string) { o.ns.Store(&ns) }

// Namespace is the namespace currentOp reports: SetNS's, else NS.
func (o *Op) Namespace() string {
	if p := o.ns.Load(); p != nil {
		return *p
	}
	return o.NS
}

// Killed reports whether killOp (or shutdown) interrupted the op.
func (o *Op) Killed() bool { return o.killed.Load() }

// Clients is the registry of open connections and their running operations.
type Clients struct {
	auth   *Auth // the server's, given to every connection (nil: none)
	mu     sync.Mutex
	conns  map[int64]*Conn
	nextID atomic.Int64 // connection ids
	nextOp atomic.Int64 // operation ids
}

// NewClients returns an empty registry.
func NewClients() *Clients { return &Clients{conns: map[int64]*Conn{}} }

// NewConn registers a new connection and gives it the next id.
func (cl *Clients) NewConn(remote, local string, loopback bool) *Conn {
	c := &Conn{ID: cl.nextID.Add(1), Remote: remote, Local: local, Loopback: loopback, Created: time.Now(), serverAuth: cl.auth}
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
		Cmd: keepCmd(RedactSecrets(cmd)), Start: time.Now(), cancel: cancel,
	}
	if v, err := cmd.LookupErr("lsid"); err == nil {
		if k, err := ParseLsid(v); err == nil {
			op.Session, op.InSession = k, true
		}
	}
	conn.mu.Lock()
	conn.op = op
	conn.mu.Unlock()
	return op, operation.WithOpStats(ctx, &op.Stats)
}

// LargeCommandBytes is wire.LargeMessageBytes (a test checks they agree): the wire layer
// never reuses the buffer of a message larger than that.
const LargeCommandBytes = 1 << 20

// keepCmd returns the command for Op.Cmd, which may outlive the message buffer a small command
// aliases (the connection reuses it): small commands are copied; a large one (over
// LargeCommandBytes) is kept as is, since its buffer is never reused, so a 48 MB insert is
// not copied once more.
func keepCmd(cmd bsoncore.Document) bsoncore.Document {
	if len(cmd) > LargeCommandBytes {
		return cmd
	}
	return append(bsoncore.Document(nil), cmd...)
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

// KillAs is killOp's Kill for session s: only an operation s may kill, with killop on the
// cluster or on one of its own user's connections (KillOpCmdBase: another user's operation
// is left alone, and the command still succeeds). It reports whether it killed one.
func (cl *Clients) KillAs(s *AuthSession, opID int64, cause error) bool {
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op == nil || op.ID != opID {
			continue
		}
		if !s.Allowed(auth.Cluster(), auth.Killop) && !s.IsCoauthorizedWith(c.Users()) {
			return false
		}
		op.kill(cause)
		return true
	}
	return false
}

// LockHolders describes the running operations that hold locks (a rollback waiting for the
// global lock logs them): "opid name ns [type:mode ...]" each.
func (cl *Clients) LockHolders() []string {
	var out []string
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op == nil {
			continue
		}
		held := op.Stats.HeldLocks()
		if len(held) == 0 {
			continue
		}
		s := fmt.Sprintf("%d %s %s", op.ID, op.Name, op.Namespace())
		for _, h := range held {
			s += fmt.Sprintf(" %s:%v", h.Name, h.Mode)
		}
		out = append(out, s)
	}
	return out
}

// KillLockHolders interrupts every running operation that holds a lock (a member entering
// ROLLBACK, whose global X lock they would keep waiting).
func (cl *Clients) KillLockHolders(cause error) {
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op != nil && len(op.Stats.HeldLocks()) > 0 {
			op.kill(cause)
		}
	}
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

// KillWrites interrupts every running operation whose command reg registers as a write
// (step-down kills the operations that conflict with the state change, MongoDB's
// killConflictingOperations).
func (cl *Clients) KillWrites(reg *Registry, cause error) {
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op == nil {
			continue
		}
		if cmd := reg.Lookup(op.Name); cmd != nil && cmd.Writes {
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
