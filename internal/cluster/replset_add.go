package cluster

// Harness additions for replica sets whose membership and data tests compare: adding a member
// to a running set (replSetReconfig, the way rs.add does it), reading a member's optimes,
// waiting until members caught up with the primary, and per-collection hashes (dbHash) to
// compare members' data (spec/replication.md, "Initial Sync"; issue 5's acceptance).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// OpTime is a replication optime as replSetGetStatus reports it, decoded by the driver (the
// server's own type is optime.OpTime; this one carries the driver's bson tags and types).
type OpTime struct {
	TS bson.Timestamp `bson:"ts"`
	T  int64          `bson:"t"`
}

// Less orders optimes by term, then timestamp (MongoDB's OpTime order).
func (o OpTime) Less(p OpTime) bool {
	if o.T != p.T {
		return o.T < p.T
	}
	return o.TS.Before(p.TS)
}

func (o OpTime) String() string { return fmt.Sprintf("{ts: %d.%d, t: %d}", o.TS.T, o.TS.I, o.T) }

// Optimes is replSetGetStatus's optimes document (the fields the harness reads) with myState.
type Optimes struct {
	MyState int `bson:"myState"`
	Optimes struct {
		LastCommitted OpTime `bson:"lastCommittedOpTime"`
		Applied       OpTime `bson:"appliedOpTime"`
		Durable       OpTime `bson:"durableOpTime"`
	} `bson:"optimes"`
}

// Optimes runs replSetGetStatus on node and returns its state and optimes.
func (d *Deployment) Optimes(ctx context.Context, node *Process) (*Optimes, error) {
	var o Optimes
	err := d.direct[node].Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&o)
	if err != nil {
		return nil, fmt.Errorf("replSetGetStatus %s: %w", node.Name(), err)
	}
	return &o, nil
}

// AddMember starts a new, empty humongod for the set (same binary and Options.Args as
// Start was given in opts) and adds it to the config through the primary with
// replSetReconfig: the current config's members plus {_id: max+1, host}, with member's
// fields (priority, votes, ...; nil: defaults) and the version raised by one. The new member
// then initial-syncs on its own; AddMember does not wait for it (WaitForState does). It is
// appended to d.Nodes and gets a direct client; it is killed when the test ends.
func (d *Deployment) AddMember(t testing.TB, ctx context.Context, opts Options, member bson.D) (*Process, error) {
	t.Helper()
	p, err := d.StartNewMember(t, ctx, opts)
	if err != nil {
		return nil, err
	}
	return p, d.AddToConfig(ctx, p, member)
}

// StartNewMember is AddMember's first half: it starts the new, empty humongod (a replica-set
// member of no config yet), appends it to d.Nodes and gives it a direct client, so a test can
// prepare it (fail points) before AddToConfig makes it a member.
func (d *Deployment) StartNewMember(t testing.TB, ctx context.Context, opts Options) (*Process, error) {
	t.Helper()
	if d.Topology.Kind != ReplicaSet {
		return nil, fmt.Errorf("AddMember: %v is not a replica set", d.Topology)
	}
	if opts.BinDir == "" {
		opts.BinDir = os.Getenv("HUMONGO_BIN_DIR")
	}
	if opts.BinDir == "" {
		opts.BinDir = MustBuild(t, "humongod")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	p, err := NewProcess(ProcessOptions{
		Name: fmt.Sprintf("n%d", len(d.Nodes)), Binary: opts.BinDir + "/humongod", Dir: t.TempDir(),
		Args: append([]string{"--replSet", d.Topology.Name}, opts.Args...), StartTimeout: opts.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("--- last %d lines of %s (%s) ---\n%s", tailLines, p.Name(), p.LogPath(), strings.Join(p.Tail(tailLines), "\n"))
		}
	})
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx); err != nil {
		return nil, err
	}
	d.Nodes = append(d.Nodes, p)
	d.direct[p] = Connect(t, p.URI())
	return p, nil
}

// AddToConfig is AddMember's second half, rs.add: read the config from the primary and
// reconfigure with p as one more member. A reconfig can fail transiently (the previous config
// not yet committed, a step-down in between), so it is retried until ctx ends.
func (d *Deployment) AddToConfig(ctx context.Context, p *Process, member bson.D) error {
	var last error
	for {
		last = d.addToConfig(ctx, p.Addr(), member)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("add %s to the set: %w (last: %v)", p.Name(), ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *Deployment) addToConfig(ctx context.Context, host string, member bson.D) error {
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		return err
	}
	admin := d.direct[primary].Database("admin")
	var got struct {
		Config bson.D `bson:"config"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetGetConfig", Value: 1}}).Decode(&got); err != nil {
		return fmt.Errorf("replSetGetConfig on %s: %w", primary.Name(), err)
	}
	cfg := make(bson.D, 0, len(got.Config))
	for _, e := range got.Config {
		switch e.Key {
		case "version":
			v, ok := asInt64(e.Value)
			if !ok {
				return fmt.Errorf("config version %v", e.Value)
			}
			e.Value = v + 1
		case "members":
			ms, ok := e.Value.(bson.A)
			if !ok {
				return fmt.Errorf("config members %T", e.Value)
			}
			maxID := int64(-1)
			for _, m := range ms {
				md, _ := m.(bson.D)
				for _, f := range md {
					if f.Key == "host" && f.Value == host {
						return nil // already a member (an earlier attempt went through)
					}
					if id, ok := asInt64(f.Value); f.Key == "_id" && ok && id > maxID {
						maxID = id
					}
				}
			}
			nm := bson.D{{Key: "_id", Value: maxID + 1}, {Key: "host", Value: host}}
			e.Value = append(append(bson.A(nil), ms...), append(nm, member...))
		case "term":
			continue // the primary stamps its own term on a non-force reconfig
		}
		cfg = append(cfg, e)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "replSetReconfig", Value: cfg}}).Err(); err != nil {
		return fmt.Errorf("replSetReconfig on %s: %w", primary.Name(), err)
	}
	return nil
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		return int64(x), x == float64(int64(x))
	case int:
		return int64(x), true
	}
	return 0, false
}

// WaitCaughtUp waits until every running, unpaused member in nodes (all of d.Nodes when
// empty) has applied the primary's appliedOpTime as read once at the start, and returns that
// optime. Writes that continue meanwhile are not waited for: stop them first when the members
// must end identical.
func (d *Deployment) WaitCaughtUp(ctx context.Context, nodes ...*Process) (OpTime, error) {
	primary, err := d.WaitForPrimary(ctx)
	if err != nil {
		return OpTime{}, err
	}
	po, err := d.Optimes(ctx, primary)
	if err != nil {
		return OpTime{}, err
	}
	target := po.Optimes.Applied
	if len(nodes) == 0 {
		nodes = d.Nodes
	}
	for _, n := range nodes {
		if !n.Running() || n.Paused() || n == primary {
			continue
		}
		var last error
		for {
			o, err := d.Optimes(ctx, n)
			if err == nil {
				if !o.Optimes.Applied.Less(target) {
					break
				}
				err = fmt.Errorf("%s (state %d) applied %v", n.Name(), o.MyState, o.Optimes.Applied)
			}
			last = err
			select {
			case <-ctx.Done():
				return target, fmt.Errorf("waiting for %s to apply %s's %v: %w (last: %v)", n.Name(), primary.Name(), target, ctx.Err(), last)
			case <-time.After(pollInterval):
			}
		}
	}
	return target, nil
}

// DBHash is dbHash's reply: per collection md5, and md5 of the whole database.
type DBHash struct {
	Host        string            `bson:"host"`
	Collections map[string]string `bson:"collections"`
	MD5         string            `bson:"md5"`
}

// DBHash runs dbHash for database db on node (any state: the command is allowed on
// secondaries, where it reads at lastApplied).
func (d *Deployment) DBHash(ctx context.Context, node *Process, db string) (*DBHash, error) {
	var h DBHash
	if err := d.direct[node].Database(db).RunCommand(ctx, bson.D{{Key: "dbHash", Value: 1}}).Decode(&h); err != nil {
		return nil, fmt.Errorf("dbHash %s on %s: %w", db, node.Name(), err)
	}
	return &h, nil
}

// CompareDBHashes runs dbHash for db on every node and returns an error naming each
// collection whose hash differs between members (or that some member lacks), or nil when
// all agree. The hashes are returned by node name for logs.
func (d *Deployment) CompareDBHashes(ctx context.Context, db string, nodes ...*Process) (map[string]*DBHash, error) {
	if len(nodes) == 0 {
		nodes = d.Nodes
	}
	out := map[string]*DBHash{}
	var ref *DBHash
	var refName string
	var errs []error
	for _, n := range nodes {
		h, err := d.DBHash(ctx, n, db)
		if err != nil {
			return out, err
		}
		out[n.Name()] = h
		if ref == nil {
			ref, refName = h, n.Name()
			continue
		}
		for c, want := range ref.Collections {
			if got, ok := h.Collections[c]; !ok {
				errs = append(errs, fmt.Errorf("%s.%s: on %s (%s), missing on %s", db, c, refName, want, n.Name()))
			} else if got != want {
				errs = append(errs, fmt.Errorf("%s.%s: %s on %s, %s on %s", db, c, want, refName, got, n.Name()))
			}
		}
		for c, got := range h.Collections {
			if _, ok := ref.Collections[c]; !ok {
				errs = append(errs, fmt.Errorf("%s.%s: on %s (%s), missing on %s", db, c, n.Name(), got, refName))
			}
		}
	}
	return out, errors.Join(errs...)
}
