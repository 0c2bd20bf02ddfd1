package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

func addKillSessions(r *service.Registry) {
	add(r, &service.Command{
		Name:      "killSessions",
		Auth:      service.AuthAnyUser,
		Handler:   runKillSessions,
		Help:      "kill a logical session and its operations",
		Secondary: service.SecondaryAlways,
	})
}

// runKillSessions kills the listed sessions: their running operations, cursors and
// transactions (service.State.KillSessions). An empty list means the sessions of the
// authenticated users (MongoDB's makeSessionFilterForAuthenticatedUsers): without
// authentication there are none, so it kills nothing, as mongod.
func runKillSessions(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	keys, err := service.ParseLsidArray("killSessions", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	if keys, err = service.OwnSessions(env, keys, auth.KillAnySession); err != nil {
		return nil, err
	}
	m := newSessionMatcher()
	for _, k := range keys {
		m.lsids[k] = true
	}
	killSessions(env, m)
	return emptyDoc, nil
}

// sessionMatcher selects sessions as MongoDB's SessionKiller::Matcher does: all, or those of
// the listed uids, or the listed lsids.
type sessionMatcher struct {
	all   bool
	uids  map[[32]byte]bool
	lsids map[lsc.Key]bool
}

func newSessionMatcher() *sessionMatcher {
	return &sessionMatcher{uids: map[[32]byte]bool{}, lsids: map[lsc.Key]bool{}}
}

func (m *sessionMatcher) match(k lsc.Key) bool { return m.all || m.lsids[k] || m.uids[k.UID] }

func (m *sessionMatcher) empty() bool { return !m.all && len(m.uids) == 0 && len(m.lsids) == 0 }

// killSessions kills the sessions m selects, sparing the killing command's own operation.
func killSessions(env *service.Env, m *sessionMatcher) {
	if m.empty() {
		return
	}
	env.State.KillSessions(env.Op, m.match)
}
