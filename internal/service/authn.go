package service

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/txn/lsc"
)

// Authentication and authorization of a server (MongoDB's AuthorizationManager and
// AuthorizationSession): who each connection authenticated as, the user cache, the localhost
// exception, and the check dispatch runs before every command. Users and roles come from a
// UserStore the role provides (mongod: its own admin.system.users and admin.system.roles;
// humongos: the config server's).

// UserStore is where a server finds users and roles.
type UserStore interface {
	User(ctx context.Context, name auth.UserName) (u auth.User, ok bool, err error)
	Role(ctx context.Context, name auth.RoleName) (r auth.Role, ok bool, err error)
	// AnyUsers reports whether any user or role exists (ends the localhost exception).
	AnyUsers(ctx context.Context) (bool, error)
}

// AuthParams are the authentication parameters every role declares.
func AuthParams() []ParamSpec {
	return []ParamSpec{
		{Name: "enableLocalhostAuthBypass", Kind: ParamBool, Default: true, Startup: true},
		{Name: "scramIterationCount", Kind: ParamInt, Default: int64(auth.DefaultSHA1Iterations),
			Runtime: true, Startup: true, Min: auth.MinSHA1Iterations, Max: 1 << 30},
		{Name: "scramSHA256IterationCount", Kind: ParamInt, Default: int64(auth.DefaultSHA256Iterations),
			Runtime: true, Startup: true, Min: auth.MinSHA256Iterations, Max: 1 << 30},
		{Name: "authenticationMechanisms", Kind: ParamString, Default: "SCRAM-SHA-1,SCRAM-SHA-256", Startup: true},
		{Name: "userCacheInvalidationIntervalSecs", Kind: ParamInt, Default: int64(30), Runtime: true, Startup: true, Min: 1, Max: 86400},
	}
}

// Auth is a server's authentication state. The zero value has authorization off and no
// store: every command runs for everyone (a server without --auth or --keyFile).
type Auth struct {
	// Enabled: --auth, security.authorization or a keyfile (MongoDB turns authorization on
	// with internal authentication).
	Enabled bool
	// Store finds users and roles; nil: only the internal user exists.
	Store UserStore

	// internal are the __system@local credentials from the keyfile (nil without one), and
	// the internal user's cache entry.
	internal   map[string]auth.Credential
	internalCU *cachedUser

	// gen counts user and role changes: a cached user resolved at an older generation is
	// resolved again.
	gen      atomic.Uint64
	hadUsers atomic.Bool // a user or role was seen: the localhost exception is over for good
	// noUsersUntil (unix nanoseconds) caches a store's "no users yet" for noUsersTTL, so a
	// router does not ask the config servers before every command of an unauthenticated
	// local client.
	noUsersUntil atomic.Int64

	mu    sync.Mutex
	cache map[auth.UserName]*cachedUser // guarded by mu

	// Counters for serverStatus.security.authentication.mechanisms.
	Counters AuthCounters
}

// AuthCounters count authentication attempts per mechanism.
type AuthCounters struct {
	SHA1Received, SHA1Succeeded     atomic.Int64
	SHA256Received, SHA256Succeeded atomic.Int64
	Failed                          atomic.Int64
}

func (c *AuthCounters) count(mech string, ok bool) {
	switch mech {
	case auth.MechSCRAMSHA1:
		c.SHA1Received.Add(1)
		if ok {
			c.SHA1Succeeded.Add(1)
		}
	case auth.MechSCRAMSHA256:
		c.SHA256Received.Add(1)
		if ok {
			c.SHA256Succeeded.Add(1)
		}
	}
	if !ok {
		c.Failed.Add(1)
	}
}

type cachedUser struct {
	user     auth.User
	resolved auth.Resolved
	gen      uint64
	at       time.Time

	// session is the user's authorization session, made once: every command of the user's
	// connections shares it while the cache entry lives (it is read-only).
	sessionOnce sync.Once
	session     *AuthSession
}

// sessionFor returns the cached user's session (u is its name).
func (cu *cachedUser) sessionFor(u auth.UserName) *AuthSession {
	cu.sessionOnce.Do(func() {
		cu.session = NewAuthSession(u, cu.resolved)
		cu.session.direct = cu.user.Roles
	})
	return cu.session
}

// SetKeyfile makes key the password of the internal user __system@local (security.keyFile).
func (a *Auth) SetKeyfile(key string) error {
	creds, err := auth.KeyfileCredentials(key)
	if err != nil {
		return err
	}
	a.internal = creds
	a.internalCU = &cachedUser{user: auth.User{Name: internalUser, Credentials: creds,
		Roles: []auth.RoleName{{Role: "__system", DB: "admin"}}}, resolved: internalResolved}
	return nil
}

// Invalidate drops every cached user: users or roles changed (user management commands on
// this server), so the localhost exception is over too.
func (a *Auth) Invalidate() {
	a.hadUsers.Store(true)
	a.DropCache()
}

// DropCache drops every cached user: users or roles may have changed (replicated writes,
// rollback); whether any exist is asked again.
func (a *Auth) DropCache() {
	a.gen.Add(1)
	a.noUsersUntil.Store(0)
	a.mu.Lock()
	a.cache = nil
	a.mu.Unlock()
}

// internalUser is the keyfile's user.
var internalUser = auth.UserName{User: "__system", DB: "local"}

var internalResolved = func() auth.Resolved {
	r, _ := auth.Resolve([]auth.RoleName{{Role: "__system", DB: "admin"}}, nil)
	return r
}()

// lookupUser returns a user and what its roles amount to, from the cache while it is fresh
// (the generation has not moved and userCacheInvalidationIntervalSecs has not passed: a
// secondary drops its cache as it applies a users or roles write, a router learns the config
// servers' changes no later than that).
func (a *Auth) lookupUser(ctx context.Context, st *State, name auth.UserName) (*cachedUser, bool, error) {
	if name == internalUser && a.internalCU != nil {
		return a.internalCU, true, nil
	}
	if a.Store == nil {
		return nil, false, nil
	}
	gen := a.gen.Load()
	ttl := time.Duration(st.Params.Int("userCacheInvalidationIntervalSecs")) * time.Second
	a.mu.Lock()
	if cu, ok := a.cache[name]; ok && cu.gen == gen && time.Since(cu.at) < ttl {
		a.mu.Unlock()
		return cu, true, nil
	}
	a.mu.Unlock()
	u, ok, err := a.Store.User(ctx, name)
	if err != nil || !ok {
		return nil, false, err
	}
	res, err := auth.Resolve(u.Roles, func(r auth.RoleName) (auth.Role, bool, error) { return a.Store.Role(ctx, r) })
	if err != nil {
		return nil, false, err
	}
	cu := &cachedUser{user: u, resolved: res, gen: gen, at: time.Now()}
	a.mu.Lock()
	if a.gen.Load() == gen {
		if a.cache == nil {
			a.cache = map[auth.UserName]*cachedUser{}
		}
		a.cache[name] = cu
	}
	a.mu.Unlock()
	return cu, true, nil
}

// localhostBypass reports whether c may use the localhost exception: authorization is on, c
// is a loopback connection, the parameter allows it, and no user or role exists yet.
func (a *Auth) localhostBypass(ctx context.Context, st *State, c *Conn) bool {
	if !c.Loopback || a.hadUsers.Load() || !st.Params.Bool("enableLocalhostAuthBypass") {
		return false
	}
	if a.Store == nil || time.Now().UnixNano() < a.noUsersUntil.Load() {
		return true
	}
	any, err := a.Store.AnyUsers(ctx)
	if err != nil {
		return false
	}
	if any {
		a.hadUsers.Store(true)
		return false
	}
	a.noUsersUntil.Store(time.Now().Add(noUsersTTL).UnixNano())
	return true
}

// preAuthLookupTimeout bounds the session lookup of a command that needs no authentication.
const preAuthLookupTimeout = time.Second

// noUsersTTL is how long a "no users yet" answer is trusted. A user created through this
// server ends the exception at once (Invalidate); one created elsewhere (another router,
// the config server) within this time.
const noUsersTTL = time.Second

// AuthSession is what one command's authorization checks see: the connection's user and
// privileges.
type AuthSession struct {
	// Enabled is false when authorization is off (every check passes).
	Enabled bool
	// Bypass: the localhost exception applies (every check passes).
	Bypass bool
	// User is the authenticated user (nil when none).
	User   *auth.UserName
	privs  auth.Privileges
	roles  []auth.RoleName // granted and inherited
	direct []auth.RoleName // granted
}

// NewAuthSession is the session of user with what its roles resolved to, authorization on
// (Session builds one per command from the user cache; tests of checks build their own).
func NewAuthSession(user auth.UserName, res auth.Resolved) *AuthSession {
	return &AuthSession{Enabled: true, User: &user, privs: res.Privileges, roles: res.Roles}
}

// Allowed reports whether the session may do every action of acts on r.
func (s *AuthSession) Allowed(r auth.Resource, acts ...auth.Action) bool {
	if s == nil || !s.Enabled || s.Bypass {
		return true
	}
	return s.privs.Allows(r, auth.Actions(acts...))
}

// AnyOn reports whether the session holds any privilege on r (listDatabases' and
// listCollections' authorized-only forms).
func (s *AuthSession) AnyOn(r auth.Resource) bool {
	if s == nil || !s.Enabled || s.Bypass {
		return true
	}
	return s.privs.AnyOn(r)
}

// Privileges are the session's privileges (empty without a user).
func (s *AuthSession) Privileges() auth.Privileges { return s.privs }

// Roles are the session's roles, granted and inherited.
func (s *AuthSession) Roles() []auth.RoleName { return s.roles }

// Users are the authenticated users as a list (at most one).
func (s *AuthSession) Users() []auth.UserName {
	if s == nil || s.User == nil {
		return nil
	}
	return []auth.UserName{*s.User}
}

// IsCoauthorizedWith reports whether the session may use what owners created (a cursor, a
// session): authorization off, or the same user (MongoDB's isCoauthorizedWith: both
// unauthenticated also qualifies).
func (s *AuthSession) IsCoauthorizedWith(owners []auth.UserName) bool {
	if s == nil || !s.Enabled {
		return true
	}
	if len(owners) == 0 {
		return s.User == nil
	}
	return s.User != nil && *s.User == owners[0]
}

// ErrNotAuthorized is what a command's Auth check returns when the session lacks a
// privilege; dispatch turns it into MongoDB's Unauthorized reply for the command.
var ErrNotAuthorized = errors.New("not authorized")

// Session returns c's authorization session for one command.
func (a *Auth) Session(ctx context.Context, st *State, c *Conn) (*AuthSession, error) {
	s := &AuthSession{Enabled: a.Enabled}
	if !a.Enabled {
		return s, nil
	}
	if u := c.AuthUser(); u != nil {
		cu, ok, err := a.lookupUser(ctx, st, *u)
		if err != nil {
			return nil, err
		}
		if ok {
			return cu.sessionFor(*u), nil
		}
		// The user was dropped: the connection keeps its name but no privileges.
		s.User = u
		return s, nil
	}
	s.Bypass = a.localhostBypass(ctx, st, c)
	return s, nil
}

// Authorize is dispatch's check of command c for env's connection: a command that needs
// authentication needs an authenticated user (or the localhost exception), then its own
// check, if it has one (MongoDB's checkAuthorization).
func (a *Auth) Authorize(ctx context.Context, env *Env, c *Command, cmd bsoncore.Document) error {
	if !c.RequiresAuth {
		// Nothing to decide. Who sends a $clusterTime still matters (one without
		// advanceClusterTime must sign it), so the session is looked up for those, briefly:
		// a router's config servers may not answer yet while clients already run hello.
		if _, err := cmd.LookupErr("$clusterTime"); err == nil {
			sctx, cancel := context.WithTimeout(ctx, preAuthLookupTimeout)
			defer cancel()
			if s, err := a.Session(sctx, env.State, env.Conn); err == nil {
				env.Auth = s
			}
		}
		return nil
	}
	s, err := a.Session(ctx, env.State, env.Conn)
	if err != nil {
		return err
	}
	env.Auth = s
	if !a.Enabled || !c.RequiresAuth || s.Bypass {
		return nil
	}
	if s.User == nil {
		return mongoerr.Newf(mongoerr.Unauthorized, "Command %s requires authentication", c.Name)
	}
	if c.Auth == nil {
		return nil
	}
	if err := c.Auth(s, env.DB, cmd); err != nil {
		if errors.Is(err, ErrNotAuthorized) {
			return notAuthorized(env.DB, cmd)
		}
		return err
	}
	return nil
}

// notAuthorized is MongoDB's Unauthorized reply for a command the user may not run. The
// command is shown without its arguments' values beyond the first (it may hold passwords).
func notAuthorized(db string, cmd bsoncore.Document) error {
	var b strings.Builder
	b.WriteString("{ ")
	elems, _ := cmd.Elements()
	for i, e := range elems {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Key())
		if i == 0 {
			b.WriteString(": ")
			b.WriteString(e.Value().String())
		} else {
			b.WriteString(": ...")
		}
	}
	b.WriteString(" }")
	return mongoerr.Newf(mongoerr.Unauthorized, "not authorized on %s to execute command %s", db, b.String())
}

// logAuthFailure logs a failed authentication (mongod's 20249) without secrets.
func logAuthFailure(st *State, c *Conn, mech string, user auth.UserName, why error) {
	st.Logger.Info("Authentication failed", logv2.C(logv2.Access), logv2.ID(20249), logv2.Ctx(c.Desc()),
		"mechanism", mech, "speculative", false, "principalName", user.User, "authenticationDatabase", user.DB,
		"remote", c.Remote, "result", why.Error())
}

// UserDigest is a user's logical session uid: SHA-256 of "user@db" (MongoDB's
// getLogicalSessionUserDigestFor).
func UserDigest(u auth.UserName) [32]byte { return sha256.Sum256([]byte(u.User + "@" + u.DB)) }

// OwnSessionUIDs are the uids of the sessions s's user owns ($listLocalSessions without
// users): its digest; the unauthenticated uid without a user; both for the internal user,
// whose own sessions keep the uid its commands carry (none, for a driver's).
func (s *AuthSession) OwnSessionUIDs() [][32]byte {
	switch {
	case s == nil || s.User == nil:
		return [][32]byte{lsc.NoUserUID}
	case *s.User == internalUser:
		return [][32]byte{UserDigest(*s.User), lsc.NoUserUID}
	}
	return [][32]byte{UserDigest(*s.User)}
}

// SessionOwner is the user whose digest WithSessionOwner gives s's sessions ("user@db"), or
// "" when they keep the unauthenticated uid (no user, or the internal user).
func (s *AuthSession) SessionOwner() string {
	if s == nil || s.User == nil || *s.User == internalUser {
		return ""
	}
	return s.User.String()
}

// WithSessionOwner returns cmd with its lsid's uid set to the session user's digest, so a
// session belongs to the user that uses it: another user naming the same id gets another
// session (and cannot reach the first one's transactions or cursors). cmd is returned as is
// without an lsid, and for the internal user, which forwards its clients' sessions with
// their uids.
func WithSessionOwner(cmd bsoncore.Document, s *AuthSession) bsoncore.Document {
	if s == nil || s.User == nil || *s.User == internalUser {
		return cmd
	}
	lv, err := cmd.LookupErr("lsid")
	if err != nil {
		return cmd
	}
	ld, ok := lv.DocumentOK()
	if !ok {
		return cmd
	}
	uid := UserDigest(*s.User)
	out := make([]byte, 0, len(cmd)+48)
	idx, out := bsoncore.AppendDocumentStart(out)
	elems, _ := cmd.Elements()
	for _, e := range elems {
		if e.Key() != "lsid" {
			out = append(out, e...)
			continue
		}
		li, o2 := bsoncore.AppendDocumentElementStart(out, "lsid")
		lelems, _ := ld.Elements()
		for _, le := range lelems {
			if le.Key() != "uid" {
				o2 = append(o2, le...)
			}
		}
		o2 = bsoncore.AppendBinaryElement(o2, "uid", 0, uid[:])
		out, _ = bsoncore.AppendDocumentEnd(o2, li)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// OwnSessions gives the session ids a command names without a uid (endSessions,
// killSessions, refreshSessions) the uid of env's user, as WithSessionOwner does for a
// command's own lsid: a user names its own sessions. Naming another user's uid is refused
// (MongoDB's makeLogicalSessionId: "Unauthorized to set user digest in LogicalSessionId")
// unless the user holds spoof on the cluster (killSessions: killAnySession).
func OwnSessions(env *Env, keys []lsc.Key, spoof ...auth.Action) ([]lsc.Key, error) {
	s := env.Auth
	if s == nil || s.User == nil || *s.User == internalUser {
		return keys, nil
	}
	uid := UserDigest(*s.User)
	for i := range keys {
		switch keys[i].UID {
		case lsc.NoUserUID:
			keys[i].UID = uid
		case uid:
		default:
			if len(spoof) == 0 || !s.Allowed(auth.Cluster(), spoof...) {
				return nil, mongoerr.New(mongoerr.Unauthorized, "Unauthorized to set user digest in LogicalSessionId")
			}
		}
	}
	return keys, nil
}
