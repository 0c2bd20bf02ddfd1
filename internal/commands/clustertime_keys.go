package commands

// Cluster-time signing keys on humongod (spec: sharding.md "Key management"; checklist-
// sharding.md 5 "Keys"; MongoDB's KeysCollectionManager, KeysCollectionClientDirect and
// KeysCollectionClientSharded, KeyGenerator).
//
// A replica-set member under authorization keeps a vclock.Keyring on its clock, so it signs
// the $clusterTime it sends and validates the one it receives (vclock/signing.go). The keys
// are admin.system.keys documents of the set that owns them: a plain replica set's own, or,
// in a sharded cluster, the config server's (a shard reads them from its config server; a
// config server is such a set itself). The owning set's primary makes them ahead of need
// (vclock.KeysToCreate: one valid now and its successor, each KeysRotationIntervalSec long),
// from step-up to step-down. Every member refreshes its keyring from a majority read (a key a
// failover could roll back must never sign), periodically and when a signature names a key
// it does not hold.
//
// Deviation: MongoDB makes keys whether or not authorization is on; Humongo only with it,
// since without authorization nothing is signed or validated (everyone gets the zero
// signature) and keys would only add writes to every deployment's oplog. A set restarted
// with a keyfile makes its first keys at its next step-up.

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"time"

	"humongo/internal/client"
	"humongo/internal/index"
	"humongo/internal/lock"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/primaryonly"
	"humongo/internal/repl/coord"
	"humongo/internal/service"
	"humongo/internal/sharding/shardstate"
	"humongo/internal/vclock"
)

// keyRefreshTimeout bounds one refresh of the keyring (a majority read that may wait for
// the commit point, or a config server read); keyGenerateTimeout one round of the
// generator (its writes and their majority wait).
const (
	keyRefreshTimeout  = 10 * time.Second
	keyGenerateTimeout = 30 * time.Second
)

// startClusterTimeKeys gives st's clock its keyring and starts what keeps it filled, on a
// replica-set member (rc) under authorization; elsewhere it does nothing (a standalone sends
// no $clusterTime, and without authorization nothing is signed). A shard reads its config
// server's keys; any other set its own, which its primary makes. stop ends it all.
func startClusterTimeKeys(ctx context.Context, st *service.State, role shardstate.Role, rc *coord.Coordinator) (stop func()) {
	if rc == nil || st.DB == nil || !st.Auth.Enabled {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &keyManager{st: st, rc: rc, kick: make(chan struct{}, 1)}
	var closeSource func()
	if role == shardstate.RoleShardServer {
		src := &configKeySource{st: st, opts: shardClientOptions(st, "humongod-keys", keyRefreshTimeout)}
		m.ring, closeSource = vclock.NewKeyring(src), src.close
	} else {
		m.ring, m.owner, closeSource = vclock.NewKeyring(localKeySource{st}), true, func() {}
	}
	st.Concern.Clock.SetKeys(m.ring)
	var wg sync.WaitGroup
	wg.Go(func() { m.run(ctx) })
	if m.owner {
		wg.Go(func() {
			primaryonly.FollowTerms(ctx, rc, time.Second, st.Logger, "KeysCollectionManager", primaryonly.TermHooks{
				StepUp: func(context.Context, int64) error {
					m.primary.Store(true)
					m.kickNow()
					return nil
				},
				StepDown: func() { m.primary.Store(false) },
			})
		})
	}
	return func() {
		cancel()
		wg.Wait()
		closeSource()
	}
}

// keyManager is one member's KeysCollectionManager: the refresher of its keyring and, on
// the primary of the set that owns the keys, their generator.
type keyManager struct {
	st    *service.State
	rc    *coord.Coordinator
	ring  *vclock.Keyring
	owner bool // the keys are this set's own: its primary makes them

	primary atomic.Bool   // the node is the owner's primary (FollowTerms)
	kick    chan struct{} // buffered(1): run a round now
}

func (m *keyManager) kickNow() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// validFor is KeysRotationIntervalSec.
func (m *keyManager) validFor() uint32 {
	if m.st.Params == nil {
		return vclock.DefaultKeyValiditySecs
	}
	return uint32(m.st.Params.Int(service.ParamKeysRotationIntervalSec))
}

// run is the refresh loop: a round (the generator's, on the owner's primary, then the
// keyring's refresh) and a sleep until the next (vclock.RefreshDelay), cut short by a kick.
func (m *keyManager) run(ctx context.Context) {
	interval := time.Duration(m.validFor()) * time.Second
	for {
		if m.owner && m.primary.Load() {
			// Bounded: a primary that cannot reach a majority must still refresh, and the
			// next round finds the keys it made (the local read) without making them again.
			gctx, cancel := context.WithTimeout(ctx, keyGenerateTimeout)
			err := m.generate(gctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				m.st.Logger.Warn("Failed to make cluster-time signing keys", logv2.C(logv2.Replication),
					logv2.ID(9160001), "error", err.Error())
			}
		}
		rctx, cancel := context.WithTimeout(ctx, keyRefreshTimeout)
		err := m.ring.Refresh(rctx)
		cancel()
		delay := vclock.RefreshRetryDelay
		if err == nil {
			delay = vclock.RefreshDelay(m.now(), m.ring.Newest(), interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-time.After(delay):
		}
	}
}

// now is the node's cluster time, which key expiries are in: at least its newest oplog
// entry (the clock learns it lazily, from the replies it decorates).
func (m *keyManager) now() optime.Timestamp {
	clock := &m.st.Concern.Clock
	clock.AdvanceCluster(concernNode(m.st).LastOp().TS)
	return clock.ClusterTime()
}

// generate makes the keys KeysToCreate asks for (KeyGenerator::generateNewKeysIfNeeded) and
// waits for a majority to have them. It reads the newest local keys, not the majority's: on
// the primary a key not yet majority-committed must not be made twice.
func (m *keyManager) generate(ctx context.Context) error {
	now := m.now()
	valid, err := readLocalKeys(ctx, m.st, now, false)
	if err != nil {
		return err
	}
	plan := vclock.KeysToCreate(valid, now, m.validFor())
	if len(plan) == 0 {
		return nil
	}
	for i := range plan {
		if _, err := rand.Read(plan[i].Secret[:]); err != nil {
			return err
		}
	}
	op := m.st.DB.NewOp(ctx)
	err = op.WriteCollection(ctx, vclock.KeysNS, true, func(coll *index.Collection) error {
		for _, k := range plan {
			if _, err := coll.InsertDocument(op.RU, k.Document()); err != nil {
				return err
			}
		}
		return nil
	})
	op.Close()
	if err != nil {
		return err
	}
	for _, k := range plan {
		m.st.Logger.Info("Made a cluster-time signing key", logv2.C(logv2.Replication), logv2.ID(9160002),
			"keyId", k.ID, "expiresAt", k.ExpiresAt.String())
	}
	return m.rc.WaitForWriteConcern(ctx, concernNode(m.st).LastOp(), coord.WriteConcern{Majority: true})
}

// readLocalKeys reads this node's keys that expire after t: as of the majority snapshot
// (majority), or the newest data.
func readLocalKeys(ctx context.Context, st *service.State, t optime.Timestamp, majority bool) ([]vclock.Key, error) {
	if majority {
		stable := st.DB.Engine.StableTimestamp()
		if stable.IsNull() {
			return nil, nil // nothing is majority-committed yet
		}
		ctx = operation.WithRequest(ctx, &operation.Request{Admission: new(lock.Admission),
			ReadSource: operation.ReadSource{Kind: operation.ReadMajority, TS: stable}})
	}
	docs, err := aggScan(ctx, st.DB, vclock.KeysNS, vclock.KeysFilter(t))
	if err != nil {
		return nil, err
	}
	return vclock.ParseKeys(docs), nil
}

// localKeySource is the keys of this node's own set (KeysCollectionClientDirect), read at the
// majority snapshot.
type localKeySource struct{ st *service.State }

func (s localKeySource) KeysAfter(ctx context.Context, t optime.Timestamp) ([]vclock.Key, error) {
	return readLocalKeys(ctx, s.st, t, true)
}

// configKeySource is a shard's view of its config server's keys (KeysCollectionClientSharded):
// a majority read from the nearest config server, over a client built for the config
// servers of the shard's identity (none until the shard is added to a cluster).
type configKeySource struct {
	st   *service.State
	opts client.Options

	mu      sync.Mutex
	rs      *client.ReplicaSet // guarded by mu
	connStr string             // rs's set; guarded by mu
	closed  bool               // guarded by mu
}

func (s *configKeySource) client() (*client.ReplicaSet, error) {
	id, aware := s.st.Sharding.Identity()
	if !aware {
		return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized, "the shard is not part of a sharded cluster yet: no config server to read signing keys from")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "shutting down")
	}
	if s.rs != nil && s.connStr == id.ConfigsvrConnectionString {
		return s.rs, nil
	}
	hosts, err := client.ParseReplicaSetHosts(id.ConfigsvrConnectionString)
	if err != nil {
		return nil, err
	}
	rs, err := client.NewReplicaSet(hosts, s.opts)
	if err != nil {
		return nil, err
	}
	if old := s.rs; old != nil {
		go func() { _ = old.Close(context.Background()) }()
	}
	s.rs, s.connStr = rs, id.ConfigsvrConnectionString
	return rs, nil
}

func (s *configKeySource) KeysAfter(ctx context.Context, t optime.Timestamp) ([]vclock.Key, error) {
	rs, err := s.client()
	if err != nil {
		return nil, err
	}
	return client.FindSigningKeys(ctx, rs, t)
}

func (s *configKeySource) close() {
	s.mu.Lock()
	rs := s.rs
	s.rs, s.closed = nil, true
	s.mu.Unlock()
	if rs != nil {
		_ = rs.Close(context.Background())
	}
}
