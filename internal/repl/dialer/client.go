package dialer

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// ClientOptions are what differs between the internal clients that members open to each
// other; everything else (a direct connection, Default as the dialer, no driver retries: the
// replication protocols decide themselves whether and where to retry) is the same for all.
type ClientOptions struct {
	// AppName names the client in the remote member's logs and currentOp.
	AppName string
	// ServerSelectionTimeout bounds how long an operation waits for the member to become
	// selectable, which on a dead member is the whole wait (10 seconds if zero).
	ServerSelectionTimeout time.Duration
	// PollMonitoring makes server monitoring poll instead of stream.
	PollMonitoring bool
}

// Connect returns a directConnection client for the member host, dialed through Default.
func Connect(host string, o ClientOptions) (*mongo.Client, error) {
	sel := o.ServerSelectionTimeout
	if sel <= 0 {
		sel = 10 * time.Second
	}
	opts := options.Client().ApplyURI("mongodb://" + host + "/?directConnection=true").
		SetAppName(o.AppName).SetConnectTimeout(5 * time.Second).
		SetServerSelectionTimeout(sel).SetRetryReads(false).SetRetryWrites(false).
		SetDialer(Default)
	if o.PollMonitoring {
		opts.SetServerMonitoringMode(options.ServerMonitoringModePoll)
	}
	return mongo.Connect(opts)
}

// Pool holds one Connect client per member host, created on first use. Close disconnects
// them all; afterwards Get fails with ShutdownInProgress, so no client outlives the owner's
// shutdown.
type Pool struct {
	opts ClientOptions

	mu      sync.Mutex
	clients map[string]*mongo.Client // guarded by mu
	closed  bool                     // guarded by mu
}

// NewPool returns an empty pool whose clients are built with o.
func NewPool(o ClientOptions) *Pool {
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
