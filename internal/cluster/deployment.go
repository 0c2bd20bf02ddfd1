package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/cluster/proxy"
)

// Kind is a deployment's shape.
type Kind int

const (
	// Standalone is one humongod.
	Standalone Kind = iota
	// ReplicaSet is Members humongods with --replSet Name, initiated with all of them as
	// voting members at default priority.
	ReplicaSet
	// Sharded is a config server replica set, Shards shard replica sets and Routers
	// humongos routers, the shards added through the first router (sharded.go).
	Sharded
)

func (k Kind) String() string {
	switch k {
	case Standalone:
		return "standalone"
	case ReplicaSet:
		return "replica set"
	case Sharded:
		return "sharded cluster"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Topology describes a deployment to start. The zero value is a standalone.
type Topology struct {
	Kind Kind
	// ReplicaSet: set name (default "rs0") and member count (default 3). Sharded: the
	// shards' set name prefix (default "shard": "shard0", ...) and each shard's member count
	// (default 1).
	Name    string
	Members int
	// Sharded only: shards (default 2), config server members (default 1), routers
	// (default 1).
	Shards        int
	ConfigMembers int
	Routers       int
}

func (t Topology) String() string {
	switch t.Kind {
	case ReplicaSet:
		return fmt.Sprintf("replica set %s of %d", t.Name, t.Members)
	case Sharded:
		return fmt.Sprintf("sharded cluster: %d shards of %d, %d config servers, %d routers", t.Shards, t.Members, t.ConfigMembers, t.Routers)
	}
	return t.Kind.String()
}

// Options configure a deployment.
type Options struct {
	// BinDir holds prebuilt binaries; empty uses $HUMONGO_BIN_DIR, else builds them with
	// MustBuild.
	BinDir string
	// Args are extra flags for every humongod.
	Args []string
	// RouterArgs are extra flags for every humongos.
	RouterArgs []string
	// Proxy puts a proxy.Proxy between the test's client and every node, so the test can
	// slow, cut or partition the client's links (Deployment.ClientProxy).
	Proxy bool
	// StartTimeout bounds each process start (default 30s).
	StartTimeout time.Duration
	// ReplSetSettings is the settings document of a replica set's initiate config, e.g.
	// ShortElections; nil keeps MongoDB's defaults (electionTimeoutMillis 10000,
	// heartbeatIntervalMillis 2000).
	ReplSetSettings bson.D
	// Partitionable routes every member-to-member link of a replica set through its own
	// proxy, so the test can cut links between members (Deployment.Partition, Isolate,
	// HealNetwork in partition.go). It enables test commands on every member.
	Partitionable bool
}

// ShortElections are replica-set settings for failover tests: a 2 s election timeout and
// 500 ms heartbeats, so a killed primary is replaced in about 2–3 s instead of 10–12.
// A refused heartbeat marks the member DOWN after its retries (internal/repl/topology), but
// an unanswered one (a partition) only once heartbeatTimeoutSecs has passed since the last
// answer, so that is 2 s as well: a member still believed a healthy primary blocks the
// election.
var ShortElections = bson.D{
	{Key: "electionTimeoutMillis", Value: 2000},
	{Key: "heartbeatIntervalMillis", Value: 500},
	{Key: "heartbeatTimeoutSecs", Value: 2},
}

// Deployment is a running set of processes and a client connected to it, torn down when the
// test ends.
type Deployment struct {
	Topology Topology
	// Nodes are the humongod processes (data-bearing and config servers).
	Nodes []*Process
	// Routers are the humongos processes of a sharded cluster.
	Routers []*Process
	// Config and Shards are a sharded cluster's replica sets, each a Deployment of its own
	// (its Nodes, DirectClient, Primary, ...; Client connected to the set itself).
	Config *Deployment
	Shards []*Deployment
	// URI is how Client connected (through the proxies when Options.Proxy).
	URI    string
	Client *mongo.Client

	proxies map[*Process]*proxy.Proxy
	// direct holds a directConnection client per replica-set member.
	direct map[*Process]*mongo.Client
	// links are the member-to-member proxies (nil without Options.Partitionable).
	links *memberLinks
	// roleArgs, configsvr and namePrefix make a replica set a sharded cluster's member set:
	// --configsvr or --shardsvr, configsvr: true in its initiate config, and process names
	// telling the sets apart ("cfg-n0", "shard1-n0").
	roleArgs   []string
	configsvr  bool
	namePrefix string
	// opts are the options the deployment was started with.
	opts Options
}

// ClientProxy is the proxy on the link from the test's client to node (nil without
// Options.Proxy).
func (d *Deployment) ClientProxy(node *Process) *proxy.Proxy { return d.proxies[node] }

// Start starts a deployment of the given topology and connects a client. Everything is
// stopped when the test ends.
func Start(t testing.TB, topo Topology, opts Options) *Deployment {
	t.Helper()
	if opts.BinDir == "" {
		// HUMONGO_BIN_DIR pins prebuilt binaries, e.g. while the shared tree does not build.
		opts.BinDir = os.Getenv("HUMONGO_BIN_DIR")
	}
	if opts.BinDir == "" && topo.Kind == Sharded {
		opts.BinDir = MustBuild(t, "humongod", "humongos")
	} else if opts.BinDir == "" {
		opts.BinDir = MustBuild(t, "humongod")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	d := &Deployment{Topology: topo, proxies: map[*Process]*proxy.Proxy{}}
	switch topo.Kind {
	case Standalone:
		n := StartProcess(t, ProcessOptions{
			Name: "n0", Binary: opts.BinDir + "/humongod", Dir: t.TempDir(),
			Args: opts.Args, StartTimeout: opts.StartTimeout,
		})
		d.Nodes = []*Process{n}
		addr := n.Addr()
		if opts.Proxy {
			pr := newProxy(t, addr)
			d.proxies[n] = pr
			addr = pr.Addr()
		}
		d.URI = "mongodb://" + addr + "/?directConnection=true"
	case ReplicaSet:
		d.startReplicaSet(t, opts)
		d.Client = ConnectReplicaSet(t, d.URI)
		return d
	case Sharded:
		d.opts = opts
		d.startSharded(t, opts)
		return d
	default:
		t.Fatalf("cluster: %v is not supported", topo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	for _, n := range d.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d.Client = Connect(t, d.URI)
	return d
}

// StartStandalone starts one humongod and returns it with a client connected to it.
func StartStandalone(t testing.TB, opts Options) (*Process, *mongo.Client) {
	t.Helper()
	d := Start(t, Topology{Kind: Standalone}, opts)
	return d.Nodes[0], d.Client
}

func newProxy(t testing.TB, target string) *proxy.Proxy {
	t.Helper()
	pr, err := proxy.New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.Close() })
	return pr
}
