package service

import (
	"testing"
	"time"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/vclock"
)

func testState(authOn bool) *State {
	st := NewState(Config{Params: NewParams(append(AuthParams(), ClusterTimeParams()...))})
	st.Auth.Enabled = authOn
	return st
}

// Without authorization the handshake's claim makes a member; with it, only __system does,
// and GossipPeer says who may advance the cluster time.
func TestMemberNeedsSystemUnderAuthorization(t *testing.T) {
	claim := func(c *Conn) {
		_ = c.UpdateMetadata(func(m *ClientMetadata) error { m.Set, m.Internal = true, true; return nil })
	}
	open := testState(false)
	c := open.Clients.NewConn("127.0.0.1:1", "127.0.0.1:2", true)
	claim(c)
	if !c.IsInternal() {
		t.Fatal("no authorization: the claim is not a member")
	}
	if p := GossipPeer(&Env{State: open, Conn: c}); !p.Member || p.Authorization {
		t.Fatalf("no authorization: %+v", p)
	}

	st := testState(true)
	c = st.Clients.NewConn("127.0.0.1:1", "127.0.0.1:2", false)
	claim(c)
	if c.IsInternal() {
		t.Fatal("an unauthenticated claim is a member")
	}
	root := auth.UserName{User: "root", DB: "admin"}
	c.setAuthUser(&root)
	if c.IsInternal() {
		t.Fatal("root's claim is a member")
	}
	p := GossipPeer(&Env{State: st, Conn: c, Auth: &AuthSession{Enabled: true, User: &root}})
	if p.Member || p.System || p.MayAdvance || !p.Authenticated || !p.Authorization {
		t.Fatalf("root: %+v", p)
	}
	if p.IsMember(vclock.Gossip{Internal: true}) {
		t.Fatal("root's $configTime makes it a member")
	}
	sys := internalUser
	c.setAuthUser(&sys)
	if !c.IsInternal() {
		t.Fatal("__system's claim is not a member")
	}
	if p := GossipPeer(&Env{State: st, Conn: c}); !p.Member || !p.System || !p.MayAdvance {
		t.Fatalf("__system: %+v", p)
	}
}

// maxAcceptableLogicalClockDriftSecs bounds the clock's gossip from startup on.
func TestMaxClockDriftParameter(t *testing.T) {
	p := NewParams(ClusterTimeParams())
	if err := p.SetString(ParamMaxClockDriftSecs, "60"); err != nil {
		t.Fatal(err)
	}
	st := NewState(Config{Params: p})
	if got := st.Concern.Clock.MaxDriftSecs.Load(); got != 60 {
		t.Fatalf("MaxDriftSecs %d, want 60", got)
	}
	ahead := optime.MakeTimestamp(uint32(time.Now().Unix())+3600, 0)
	if err := st.Concern.Clock.Advance(vclock.Time{Cluster: ahead}); mongoerr.CodeOf(err) != mongoerr.ClusterTimeFailsRateLimiter {
		t.Fatalf("an hour ahead with a minute's drift: %v", err)
	}
	if d := testState(false).Concern.Clock.MaxDriftSecs.Load(); d != vclock.DefaultMaxDriftSecs {
		t.Fatalf("default drift %d", d)
	}
}
