package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/cluster/proxy"
)

// Sharded cluster defaults: lean, as CI runs them (single-member sets).
const (
	defaultShards        = 2
	defaultShardMembers  = 1
	defaultConfigMembers = 1
	defaultRouters       = 1
	defaultShardPrefix   = "shard"
	// ConfigSetName is the config server replica set's name.
	ConfigSetName = "cfg"
)

// startSharded starts a sharded cluster: the config server replica set (--configsvr,
// initiated with configsvr: true), the shard replica sets (--shardsvr), the routers
// (humongos --configdb), and adds every shard through the first router once the config
// server's catalog exists. d.URI lists the routers; d.Client is connected to them.
func (d *Deployment) startSharded(t testing.TB, opts Options) {
	t.Helper()
	topo := &d.Topology
	if topo.Shards <= 0 {
		topo.Shards = defaultShards
	}
	if topo.Members <= 0 {
		topo.Members = defaultShardMembers
	}
	if topo.ConfigMembers <= 0 {
		topo.ConfigMembers = defaultConfigMembers
	}
	if topo.Routers <= 0 {
		topo.Routers = defaultRouters
	}
	if topo.Name == "" {
		topo.Name = defaultShardPrefix
	}
	if opts.Proxy || opts.Partitionable {
		t.Fatalf("cluster: proxies are not supported for sharded clusters yet")
	}
	t0 := time.Now()
	defer func() { t.Logf("%v started in %v", d.Topology, time.Since(t0)) }()
	d.Config = startMemberSet(t, opts, ConfigSetName, topo.ConfigMembers, "--configsvr")
	d.Nodes = append(d.Nodes, d.Config.Nodes...)
	for i := 0; i < topo.Shards; i++ {
		s := d.StartSet(t, fmt.Sprintf("%s%d", topo.Name, i), topo.Members, "--shardsvr")
		d.Shards = append(d.Shards, s)
		d.Nodes = append(d.Nodes, s.Nodes...)
	}

	configDB := d.Config.ConnectionString()
	dir := t.TempDir()
	addrs := make([]string, topo.Routers)
	for i := range addrs {
		r := StartProcess(t, ProcessOptions{
			Name: fmt.Sprintf("router%d", i), Binary: opts.BinDir + "/humongos", Dir: dir, NoDBPath: true,
			Args: append([]string{"--configdb", configDB, "--bind_ip", "127.0.0.1"}, opts.RouterArgs...), StartTimeout: opts.StartTimeout,
		})
		d.Routers = append(d.Routers, r)
		addrs[i] = r.Addr()
	}
	d.URI = "mongodb://" + strings.Join(addrs, ",") + "/"
	d.Client = Connect(t, d.URI)

	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	if err := d.waitConfigCatalog(ctx); err != nil {
		t.Fatal(err)
	}

	for _, s := range d.Shards {
		if err := d.AddShard(ctx, s.ConnectionString()); err != nil {
			t.Fatal(err)
		}
	}
}

// StartSet starts a replica set of members humongods with the cluster's options and
// roleArgs ("--shardsvr" for a shard, none for a plain set), not added to the cluster: for
// tests that add it themselves (or check that addShard refuses it).
func (d *Deployment) StartSet(t testing.TB, name string, members int, roleArgs ...string) *Deployment {
	t.Helper()
	return startMemberSet(t, d.opts, name, members, roleArgs...)
}

// startMemberSet starts one replica set of a sharded cluster, initiated with configsvr: true
// when roleArgs is --configsvr, with a client connected to it.
func startMemberSet(t testing.TB, opts Options, name string, members int, roleArgs ...string) *Deployment {
	t.Helper()
	s := &Deployment{Topology: Topology{Kind: ReplicaSet, Name: name, Members: members}, roleArgs: roleArgs,
		namePrefix: name + "-", proxies: map[*Process]*proxy.Proxy{}, opts: opts}
	for _, a := range roleArgs {
		s.configsvr = s.configsvr || a == "--configsvr"
	}
	s.startReplicaSet(t, opts)
	s.Client = ConnectReplicaSet(t, s.URI)
	return s
}

// ConnectionString is a replica set's "name/host,host" (addShard's and --configdb's form).
func (d *Deployment) ConnectionString() string {
	hosts := make([]string, len(d.Nodes))
	for i, n := range d.Nodes {
		hosts[i] = n.Addr()
	}
	return d.Topology.Name + "/" + strings.Join(hosts, ",")
}

// RouterClient is a client connected to router i alone, disconnected when the test ends.
func (d *Deployment) RouterClient(t testing.TB, i int) *mongo.Client {
	t.Helper()
	return Connect(t, d.Routers[i].URI())
}

// AddShard runs addShard for connString through the cluster's client (the routers).
func (d *Deployment) AddShard(ctx context.Context, connString string) error {
	err := d.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "addShard", Value: connString}}).Err()
	if err != nil {
		return fmt.Errorf("addShard %s: %w", connString, err)
	}
	return nil
}

// waitConfigCatalog waits until the config server primary has initialised its catalog
// (config.version holds the cluster id; it is written last, on step-up), which addShard
// needs.
func (d *Deployment) waitConfigCatalog(ctx context.Context) error {
	version := d.Config.Client.Database("config").Collection("version")
	for {
		n, err := version.CountDocuments(ctx, bson.D{{Key: "_id", Value: 1}})
		if err == nil && n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the config server's catalog was not initialised: %v (%w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
