package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Replica-set defaults of the harness. The timing settings are MongoDB's defaults; tests that
// exercise failover pass shorter ones in Options.ReplSetSettings.
const (
	defaultSetName = "rs0"
	defaultMembers = 3
	// pollInterval paces the harness's waits for a state it can only observe by asking
	// (hello): there is no event to block on from outside the processes.
	pollInterval = 50 * time.Millisecond
)

// Member is one replica-set member as replSetGetStatus reports it.
type Member struct {
	ID       int    `bson:"_id"`
	Name     string `bson:"name"`
	Health   int    `bson:"health"`
	State    int    `bson:"state"`
	StateStr string `bson:"stateStr"`
	Self     bool   `bson:"self"`
}

// ReplSetStatus is the part of replSetGetStatus the harness reads.
type ReplSetStatus struct {
	Set     string   `bson:"set"`
	MyState int      `bson:"myState"`
	Term    int64    `bson:"term"`
	Members []Member `bson:"members"`
}

// Count returns how many members are in state stateStr ("PRIMARY", "SECONDARY", ...).
func (s *ReplSetStatus) Count(stateStr string) int {
	n := 0
	for _, m := range s.Members {
		if m.StateStr == stateStr {
			n++
		}
	}
	return n
}

// HelloReply is the part of hello the harness reads from a replica-set member.
type HelloReply struct {
	SetName           string   `bson:"setName"`
	IsWritablePrimary bool     `bson:"isWritablePrimary"`
	Secondary         bool     `bson:"secondary"`
	Primary           string   `bson:"primary"`
	Me                string   `bson:"me"`
	Hosts             []string `bson:"hosts"`
}

// startReplicaSet starts topo.Members humongods with --replSet, initiates the set through the
// first with every member at default priority and votes plus opts.ReplSetSettings, and waits
// until a primary is writable. d.URI is the replica-set URI of every member.
func (d *Deployment) startReplicaSet(t testing.TB, opts Options) {
	t.Helper()
	if d.Topology.Name == "" {
		d.Topology.Name = defaultSetName
	}
	if d.Topology.Members <= 0 {
		d.Topology.Members = defaultMembers
	}
	if opts.Proxy {
		// A replica-set client follows the hosts hello reports, i.e. the real addresses, so a
		// client-side proxy would be bypassed; member links need proxies inside the config.
		t.Fatalf("cluster: Options.Proxy is not supported for replica sets yet")
	}
	args := append(append(append([]string{"--replSet", d.Topology.Name}, d.roleArgs...), opts.Args...), partitionArgs(opts)...)
	dir := t.TempDir()
	d.Nodes = make([]*Process, d.Topology.Members)
	// Members start concurrently: each start waits for its own "Waiting for connections".
	var wg sync.WaitGroup
	errs := make([]error, len(d.Nodes))
	for i := range d.Nodes {
		p, err := NewProcess(ProcessOptions{
			Name: fmt.Sprintf("%sn%d", d.namePrefix, i), Binary: opts.BinDir + "/humongod", Dir: dir,
			Args: args, StartTimeout: opts.StartTimeout,
		})
		if err != nil {
			t.Fatal(err)
		}
		d.Nodes[i] = p
		t.Cleanup(func() {
			_ = p.Kill()
			if t.Failed() {
				t.Logf("--- last %d lines of %s (%s) ---\n%s", tailLines, p.Name(), p.LogPath(), strings.Join(p.Tail(tailLines), "\n"))
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout+killTimeout)
			defer cancel()
			errs[i] = p.Start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	d.direct = make(map[*Process]*mongo.Client, len(d.Nodes))
	hosts := make([]string, len(d.Nodes))
	for i, n := range d.Nodes {
		hosts[i] = n.Addr()
		d.direct[n] = Connect(t, n.URI())
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	for _, n := range d.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Partitionable {
		d.startMemberLinks(t, ctx)
	}
	if err := d.initiate(ctx, opts.ReplSetSettings); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitForPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	d.URI = ReplicaSetURI(d.Topology.Name, hosts...)
}

// ReplicaSetURI is the connection string of a replica set: every host, and replicaSet=name.
func ReplicaSetURI(name string, hosts ...string) string {
	return "mongodb://" + strings.Join(hosts, ",") + "/?replicaSet=" + name
}

// InitiateConfig is the replSetInitiate config of a set: members _id 0..n-1 in hosts order at
// default priority and votes, and settings (nil: none) as the config's settings document.
func InitiateConfig(name string, hosts []string, settings bson.D) bson.D {
	members := make(bson.A, len(hosts))
	for i, h := range hosts {
		members[i] = bson.D{{Key: "_id", Value: i}, {Key: "host", Value: h}}
	}
	cfg := bson.D{{Key: "_id", Value: name}, {Key: "members", Value: members}}
	if len(settings) > 0 {
		cfg = append(cfg, bson.E{Key: "settings", Value: settings})
	}
	return cfg
}

func (d *Deployment) initiate(ctx context.Context, settings bson.D) error {
	hosts := make([]string, len(d.Nodes))
	for i, n := range d.Nodes {
		hosts[i] = n.Addr()
	}
	cfg := InitiateConfig(d.Topology.Name, hosts, settings)
	if d.configsvr {
		cfg = append(cfg, bson.E{Key: "configsvr", Value: true})
	}
	admin := d.direct[d.Nodes[0]].Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err(); err != nil {
		return fmt.Errorf("replSetInitiate on %s: %w", d.Nodes[0].Name(), err)
	}
	// Without help the first election waits out the election timeout, and until secondaries
	// replicate, members with an empty oplog can win it and lose it again to the initiator
	// (whose "initiating set" entry is newer), which made startup take 2–14 s. The
	// initiator standing at once (replSetStepUp, as `humongo up` does) settles it in about a
	// heartbeat; it can only win once the others have the config, so it is retried briefly,
	// and failing that the election timeout still elects someone.
	for attempt := 0; attempt < 10; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := admin.RunCommand(sctx, bson.D{{Key: "replSetStepUp", Value: 1}}).Err()
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// DirectClient is a client connected to node alone (directConnection), for commands that
// must reach one member whatever its state. It reconnects by itself after a restart.
func (d *Deployment) DirectClient(node *Process) *mongo.Client { return d.direct[node] }

// Hello runs hello on node through its direct client.
func (d *Deployment) Hello(ctx context.Context, node *Process) (*HelloReply, error) {
	var h HelloReply
	err := d.direct[node].Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h)
	if err != nil {
		return nil, fmt.Errorf("hello %s: %w", node.Name(), err)
	}
	return &h, nil
}

// Status runs replSetGetStatus on node.
func (d *Deployment) Status(ctx context.Context, node *Process) (*ReplSetStatus, error) {
	var s ReplSetStatus
	err := d.direct[node].Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&s)
	if err != nil {
		return nil, fmt.Errorf("replSetGetStatus %s: %w", node.Name(), err)
	}
	return &s, nil
}

// Node returns the member whose address is addr ("127.0.0.1:port"), or nil.
func (d *Deployment) Node(addr string) *Process {
	for _, n := range d.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Primary asks every running member's hello once and returns the one that says it is a
// writable primary. It is an error if none does, or if two do (two writable primaries at once
// is what replication must never allow, so the harness reports it loudly).
func (d *Deployment) Primary(ctx context.Context) (*Process, error) {
	var primaries []*Process
	var errs []error
	for _, n := range d.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := d.Hello(hctx, n)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if h.IsWritablePrimary {
			primaries = append(primaries, n)
		}
	}
	switch len(primaries) {
	case 1:
		return primaries[0], nil
	case 0:
		return nil, fmt.Errorf("no writable primary among %d members: %w", len(d.Nodes), errors.Join(errs...))
	}
	names := make([]string, len(primaries))
	for i, p := range primaries {
		names[i] = p.Name()
	}
	return nil, &TwoPrimariesError{Names: names}
}

// TwoPrimariesError is more than one member saying it is a writable primary at once. Across
// terms this can be a brief, legal overlap (an old primary that has not yet heard of the new
// term), so WaitForPrimary retries it; a test asserting single-primary must look at terms.
type TwoPrimariesError struct{ Names []string }

func (e *TwoPrimariesError) Error() string {
	return fmt.Sprintf("more than one writable primary: %s", strings.Join(e.Names, ", "))
}

// WaitForPrimary waits until exactly one running member, not among exclude, is a writable
// primary, and returns it. It fails when ctx ends.
func (d *Deployment) WaitForPrimary(ctx context.Context, exclude ...*Process) (*Process, error) {
	var last error
	for {
		p, err := d.Primary(ctx)
		if err == nil {
			excluded := false
			for _, x := range exclude {
				excluded = excluded || x == p
			}
			if !excluded {
				return p, nil
			}
			err = fmt.Errorf("the primary is still %s", p.Name())
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a primary: %w (last: %v)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// WaitForState waits until node's hello reports it as a secondary (stateStr "SECONDARY") or
// writable primary ("PRIMARY"), as asked.
func (d *Deployment) WaitForState(ctx context.Context, node *Process, stateStr string) error {
	var last error
	for {
		s, err := d.Status(ctx, node)
		if err == nil {
			if s.MyState == stateCode(stateStr) {
				return nil
			}
			err = fmt.Errorf("%s is in state %d", node.Name(), s.MyState)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be %s: %w (last: %v)", node.Name(), stateStr, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// stateCode maps a member state name to replSetGetStatus's myState number.
func stateCode(stateStr string) int {
	switch stateStr {
	case "STARTUP":
		return 0
	case "PRIMARY":
		return 1
	case "SECONDARY":
		return 2
	case "RECOVERING":
		return 3
	case "STARTUP2":
		return 5
	case "ARBITER":
		return 7
	case "ROLLBACK":
		return 9
	}
	return -1
}

// StepDown runs replSetStepDown (stepDownSecs 60, the default; secondaryCatchUpPeriodSecs
// 10, or with force none: step down even if no secondary is caught up) on the current
// primary and returns it. The primary closes connections as it steps down, so a network
// error in reply is success if the node is no longer primary.
func (d *Deployment) StepDown(ctx context.Context, force bool) (*Process, error) {
	p, err := d.WaitForPrimary(ctx)
	if err != nil {
		return nil, err
	}
	cmd := bson.D{{Key: "replSetStepDown", Value: 60}}
	if force {
		cmd = append(cmd, bson.E{Key: "force", Value: true})
	} else {
		cmd = append(cmd, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: 10})
	}
	err = d.direct[p].Database("admin").RunCommand(ctx, cmd).Err()
	if err != nil {
		h, herr := d.Hello(ctx, p)
		if herr != nil || h.IsWritablePrimary {
			return nil, fmt.Errorf("replSetStepDown on %s: %w", p.Name(), err)
		}
	}
	return p, nil
}

// ConnectReplicaSet returns a client for the replica-set URI, disconnected when the test
// ends, with retryable writes as drivers default them and the short heartbeat of Connect so
// that it notices a failover quickly.
//
// It monitors with the driver's default streaming (awaitable, exhaust) hello, as
// applications do: humongod's exhaust loop waits on the topologyVersion of the reply it last
// streamed (internal/server/conn.go handleMsg), so a state change is pushed at once and
// nothing spins.
func ConnectReplicaSet(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(withInternalAuth(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second).
		SetHeartbeatInterval(500 * time.Millisecond)))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	return cl
}
