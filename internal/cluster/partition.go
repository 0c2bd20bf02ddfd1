package cluster

// Network partitions between replica-set members (ARCHITECTURE.md, testing tier 5: "link
// partitions through a per-link TCP proxy"). The replica-set config names the members' real
// addresses, and clients (the test's driver) keep reaching every member directly: only
// member-to-member links are cut, which is the partition the spec's liveness and rollback
// rules are about (spec/replication.md, "Elections": a primary that cannot see a majority
// steps down; "Rollback": its unreplicated writes are rolled back when it rejoins).
//
// With Options.Partitionable every ordered pair of members (i, j) gets its own proxy, and
// member i is told, with the test-only command testingReplicaSetHostRewrites
// (the member's client.Rewriter), to dial j's host through that proxy. Every outbound connection of a
// member to another (heartbeats, votes, replSetUpdatePosition, the oplog fetcher, initial
// sync, rollback) goes through the dialer, so cutting proxy i→j and j→i partitions i from j
// in both directions. A cut link holds traffic like a network that drops packets (proxy
// black hole) and the connections open at the cut are dropped, so both sides notice at once
// instead of when a request times out; new connections are held unanswered until the link
// heals.
//
// The rewrites live in the member's memory: a restarted member dials its peers directly
// until installRoutes runs again (the nemesis does it after every restart); the rewrite
// change then closes those direct connections.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/cluster/proxy"
)

// partitionArgs are the extra humongod flags a partitionable deployment needs: the rewrite
// command is test-only.
func partitionArgs(opts Options) []string {
	if !opts.Partitionable {
		return nil
	}
	return []string{"--setParameter", "enableTestCommands=1"}
}

// linkKey is the ordered pair (from, to): from's connections to to.
type linkKey struct{ from, to *Process }

// memberLinks is the member-to-member network of a partitionable replica set.
type memberLinks struct {
	mu    sync.Mutex
	links map[linkKey]*proxy.Proxy
	// cut holds the links cut by the current partition.
	cut map[linkKey]bool
}

// startMemberLinks creates a proxy for every ordered pair of members and installs each
// member's routes; it runs before replSetInitiate, so no member-to-member connection
// bypasses the proxies.
func (d *Deployment) startMemberLinks(t testing.TB, ctx context.Context) {
	t.Helper()
	ml := &memberLinks{links: map[linkKey]*proxy.Proxy{}, cut: map[linkKey]bool{}}
	for _, from := range d.Nodes {
		for _, to := range d.Nodes {
			if from != to {
				ml.links[linkKey{from, to}] = newProxy(t, to.Addr())
			}
		}
	}
	d.links = ml
	for _, n := range d.Nodes {
		if err := d.installRoutes(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

// installRoutes points node's connections to every other member at the proxy of that link.
// It is idempotent; call it again after node restarts (its routes are in memory only).
func (d *Deployment) installRoutes(ctx context.Context, node *Process) error {
	if d.links == nil {
		return nil
	}
	routes := bson.D{}
	for _, to := range d.Nodes {
		if to != node {
			routes = append(routes, bson.E{Key: to.Addr(), Value: d.Link(node, to).Addr()})
		}
	}
	cmd := bson.D{{Key: "testingReplicaSetHostRewrites", Value: routes}}
	if err := d.direct[node].Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
		return fmt.Errorf("install member routes on %s: %w", node.Name(), err)
	}
	return nil
}

// Partitionable reports whether member links can be cut (Options.Partitionable).
func (d *Deployment) Partitionable() bool { return d.links != nil }

// Link is the proxy that carries from's connections to to (nil without
// Options.Partitionable, or for from == to).
func (d *Deployment) Link(from, to *Process) *proxy.Proxy {
	if d.links == nil {
		return nil
	}
	return d.links.links[linkKey{from, to}]
}

// Partition splits the members into groups that cannot reach each other: every link between
// members of different groups is cut (both directions), every link within a group works.
// Members named in no group form one more group together. It replaces the previous
// partition: links it does not cut are healed.
func (d *Deployment) Partition(groups ...[]*Process) error {
	if d.links == nil {
		return errors.New("cluster: Partition needs Options.Partitionable")
	}
	group := map[*Process]int{}
	for gi, g := range groups {
		for _, n := range g {
			if d.Node(n.Addr()) != n {
				return fmt.Errorf("cluster: Partition: %s is not a member of this deployment", n.Name())
			}
			if prev, dup := group[n]; dup && prev != gi {
				return fmt.Errorf("cluster: Partition: %s is in two groups", n.Name())
			}
			group[n] = gi
		}
	}
	rest := len(groups)
	for _, n := range d.Nodes {
		if _, ok := group[n]; !ok {
			group[n] = rest
		}
	}
	d.links.mu.Lock()
	defer d.links.mu.Unlock()
	// Cut first, then drop the connections open on the newly cut links: a connection
	// accepted in between is held by the black hole, so nothing crosses the cut.
	var newlyCut []*proxy.Proxy
	for k, p := range d.links.links {
		cut := group[k.from] != group[k.to]
		switch {
		case cut && !d.links.cut[k]:
			p.SetBlackhole(proxy.Both, true)
			newlyCut = append(newlyCut, p)
		case !cut && d.links.cut[k]:
			p.Heal()
		}
		if cut {
			d.links.cut[k] = true
		} else {
			delete(d.links.cut, k)
		}
	}
	for _, p := range newlyCut {
		p.DropConnections()
	}
	return nil
}

// Isolate cuts every link between node and the other members; the other members still
// reach each other. Clients still reach node.
func (d *Deployment) Isolate(node *Process) error {
	var rest []*Process
	for _, n := range d.Nodes {
		if n != node {
			rest = append(rest, n)
		}
	}
	return d.Partition([]*Process{node}, rest)
}

// HealNetwork restores every member-to-member link: traffic held by the cut is delivered
// (unless a side gave up on its connection meanwhile). (Heal, in nemesis.go, undoes a Fault.)
func (d *Deployment) HealNetwork() error {
	if d.links == nil {
		return errors.New("cluster: HealNetwork needs Options.Partitionable")
	}
	return d.Partition()
}

// CutLinks describes the links the current partition cuts ("n0→n1, n1→n0"), for logs.
func (d *Deployment) CutLinks() string {
	if d.links == nil {
		return ""
	}
	d.links.mu.Lock()
	defer d.links.mu.Unlock()
	var out []string
	for _, from := range d.Nodes {
		for _, to := range d.Nodes {
			if d.links.cut[linkKey{from, to}] {
				out = append(out, from.Name()+"→"+to.Name())
			}
		}
	}
	return strings.Join(out, ", ")
}
