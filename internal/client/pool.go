package client

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
	"humongo/internal/vclock"
)

// Options are what differs between the internal clients a server opens to others;
// everything else (a direct connection for Connect, no driver retries: the protocols that use
// them decide themselves whether and where to retry) is the same for all.
type Options struct {
	// AppName names the client in the remote server's logs and currentOp.
	AppName string
	// Dialer is the owning server's host Rewriter (nil: hosts are dialed as they are).
	Dialer *Rewriter
	// ServerSelectionTimeout bounds how long an operation waits for a suitable server, which
	// on a dead one is the whole wait (10 seconds if zero). An operation's context deadline,
	// when earlier, bounds it too.
	ServerSelectionTimeout time.Duration
	// PollMonitoring makes server monitoring poll instead of stream.
	PollMonitoring bool
	// HeartbeatInterval is how often the driver checks each server (the wait of a streaming
	// check, the period of a polling one); zero keeps the driver's 10 s. It also bounds how
	// long a member marked unknown after a dropped connection stays unselectable while it
	// is in fact up.
	HeartbeatInterval time.Duration
	// Clock, when set, is the owning server's vector clock, gossiped with every command
	// (gossip.go): a sharded-cluster member's clients set it.
	Clock *vclock.Clock
}

// driverOptions are the driver options every internal client shares; uri names the hosts.
func (o Options) driverOptions(uri string) *options.ClientOptions {
	sel := o.ServerSelectionTimeout
	if sel <= 0 {
		sel = 10 * time.Second
	}
	opts := options.Client().ApplyURI(uri).
		SetAppName(o.AppName).SetConnectTimeout(5 * time.Second).
		SetServerSelectionTimeout(sel).SetRetryReads(false).SetRetryWrites(false)
	if o.Dialer != nil {
		opts.SetDialer(o.Dialer)
		o.Dialer.Security.apply(opts)
	}
	if o.PollMonitoring {
		opts.SetServerMonitoringMode(options.ServerMonitoringModePoll)
	}
	if o.HeartbeatInterval > 0 {
		opts.SetHeartbeatInterval(o.HeartbeatInterval)
	}
	// Every internal client is a member's: its handshake says so (vclock.MemberDriverName),
	// as MongoDB's internalClient field does, which the driver cannot send. The remote server
	// then spares it from failCommand meant for drivers and from API version checks.
	opts.SetDriverInfo(&options.DriverInfo{Name: vclock.MemberDriverName})
	if o.Clock != nil {
		opts.SetMonitor(o.monitor())
	}
	return opts
}

// Connect returns a directConnection client for host, dialed through o.Dialer.
func Connect(host string, o Options) (*mongo.Client, error) {
	return mongo.Connect(o.driverOptions("mongodb://" + host + "/?directConnection=true"))
}

// Pool holds one Connect client per host, created on first use (MongoDB's connection pool
// per host; the driver pools connections inside each client). Close disconnects
// them all; afterwards Get fails with ShutdownInProgress, so no client outlives the owner's
// shutdown.
type Pool struct {
	opts Options

	mu      sync.Mutex
	clients map[string]*mongo.Client // guarded by mu
	closed  bool                     // guarded by mu
}

// NewPool returns an empty pool whose clients are built with o.
func NewPool(o Options) *Pool {
	return &Pool{opts: o, clients: map[string]*mongo.Client{}}
}

// Get returns host's client, connecting it on first use.
func (p *Pool) Get(host string) (*mongo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, mongoerr.Newf(mongoerr.ShutdownInProgress, "%s: shutting down", p.opts.AppName)
	}
	if cl := p.clients[host]; cl != nil {
		return cl, nil
	}
	cl, err := Connect(host, p.opts)
	if err != nil {
		return nil, err
	}
	p.clients[host] = cl
	return cl, nil
}

// Close disconnects every client (waiting up to 2 seconds for each) and makes later Gets fail.
func (p *Pool) Close() {
	p.mu.Lock()
	cls := p.clients
	p.clients, p.closed = nil, true
	p.mu.Unlock()
	for _, cl := range cls {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = cl.Disconnect(ctx)
		cancel()
	}
}
