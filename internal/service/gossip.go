package service

import (
	"humongo/internal/auth"
	"humongo/internal/vclock"
)

// GossipPeer is what the server knows of env's sender for vector clock gossip (spec:
// sharding.md "SignedComponentFormat: ClusterTime signing"): whether it is a cluster member
// (Conn.IsInternal) and, under authorization, whether it authenticated, as __system or not,
// and whether it holds advanceClusterTime on the cluster (MongoDB's
// LogicalTimeValidator::isAuthorizedToAdvanceClock). Both roles gossip with it: mongod's
// concern layer and humongos's role.
//
// A command refused before its authorization session was set (an unknown command, say) has
// no env.Auth: its sender is then treated as one without advanceClusterTime, which costs it
// nothing but a signed $clusterTime in the error reply.
func GossipPeer(env *Env) vclock.Peer {
	var p vclock.Peer
	if env == nil || env.State == nil {
		return p
	}
	c := env.Conn
	if c != nil {
		p.Member = c.IsInternal()
	}
	if !env.State.Auth.Enabled {
		return p
	}
	p.Authorization = true
	if c != nil {
		if u := c.AuthUser(); u != nil && *u == internalUser {
			// __system holds every action, advanceClusterTime included.
			p.System, p.MayAdvance, p.Authenticated = true, true, true
			return p
		}
	}
	if s := env.Auth; s != nil {
		p.MayAdvance = s.Allowed(auth.Cluster(), auth.AdvanceClusterTime)
		p.Authenticated = s.User != nil || s.Bypass
	}
	return p
}

// Parameters of the signed cluster time, startup-only as in MongoDB.
const (
	// ParamKeysRotationIntervalSec is how long each signing key is valid (90 days).
	ParamKeysRotationIntervalSec = "KeysRotationIntervalSec"
	// ParamMaxClockDriftSecs is how far ahead of the wall clock gossip may move the vector
	// clock (one year; vclock.Clock.MaxDriftSecs).
	ParamMaxClockDriftSecs = "maxAcceptableLogicalClockDriftSecs"
)

// ClusterTimeParams are the signed cluster time's parameters, which every role declares.
func ClusterTimeParams() []ParamSpec {
	return []ParamSpec{
		{Name: ParamKeysRotationIntervalSec, Kind: ParamInt, Default: int64(vclock.DefaultKeyValiditySecs),
			Startup: true, Min: 1, Max: 1<<31 - 1},
		{Name: ParamMaxClockDriftSecs, Kind: ParamInt, Default: int64(vclock.DefaultMaxDriftSecs),
			Startup: true, Min: 1, Max: 1<<31 - 1},
	}
}

// FollowClockParams makes st's vector clock use the maxAcceptableLogicalClockDriftSecs
// parameter, when the role declares it.
func FollowClockParams(st *State) {
	if st.Params == nil {
		return
	}
	if _, ok := st.Params.Spec(ParamMaxClockDriftSecs); ok {
		st.Params.Watch(ParamMaxClockDriftSecs, func(v any) {
			if n, ok := v.(int64); ok && n > 0 {
				st.Concern.Clock.MaxDriftSecs.Store(n)
			}
		})
	}
}
