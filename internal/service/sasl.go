package service

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
)

// The authentication commands every role shares: saslStart, saslContinue (SCRAM-SHA-1 and
// SCRAM-SHA-256, skipEmptyExchange, speculative authentication in hello), authenticate,
// logout and connectionStatus.

// saslState is a connection's SASL conversation in progress.
type saslState struct {
	id   int32
	conv *auth.Conversation
	user auth.UserName // the user named in the first message (db from the command)
	skip bool          // skipEmptyExchange
	// proved: the final server message was sent; without skipEmptyExchange one empty
	// saslContinue remains.
	proved bool
}

// AuthCommands returns the authentication commands.
func AuthCommands() []*Command {
	return []*Command{
		{Name: "saslStart", Handler: runSaslStart, PreAuth: true, Secondary: SecondaryAlways,
			AllowedOnOpQuery: true, Help: "Begins a SASL authentication conversation"},
		{Name: "saslContinue", Handler: runSaslContinue, PreAuth: true, Secondary: SecondaryAlways,
			AllowedOnOpQuery: true, Help: "Continues a SASL authentication conversation"},
		{Name: "authenticate", Handler: runAuthenticate, PreAuth: true, Secondary: SecondaryAlways,
			AllowedOnOpQuery: true, Help: "Authenticates with a mechanism that needs no conversation"},
		{Name: "logout", Handler: runLogout, PreAuth: true, Secondary: SecondaryAlways,
			Help: "Logs the connection's user out"},
		{Name: "connectionStatus", Handler: runConnectionStatus, PreAuth: true, Secondary: SecondaryAlways,
			Help: "Returns connection-specific information such as logged-in users and their roles"},
	}
}

func mechanismEnabled(st *State, mech string) bool {
	for _, m := range strings.Split(st.Params.String("authenticationMechanisms"), ",") {
		if strings.TrimSpace(m) == mech {
			return true
		}
	}
	return false
}

// saslPayload reads a payload field: binary (drivers) or string (old shells).
func saslPayload(cmd bsoncore.Document, name string) (string, error) {
	v := lookupValue(cmd, "payload")
	switch v.Type {
	case bsoncore.TypeBinary:
		_, data := v.Binary()
		return string(data), nil
	case bsoncore.TypeString:
		return v.StringValue(), nil
	case 0:
		return "", mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.payload' is missing but a required field", name)
	}
	return "", mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.payload' is the wrong type '%s', expected types '[string, binData]'",
		name, bsonutil.TypeName(v.Type))
}

func appendSaslReply(b []byte, id int32, done bool, payload string) []byte {
	b = bsoncore.AppendInt32Element(b, "conversationId", id)
	b = bsoncore.AppendBooleanElement(b, "done", done)
	return bsoncore.AppendBinaryElement(b, "payload", 0, []byte(payload))
}

func authFailed() error { return mongoerr.New(mongoerr.AuthenticationFailed, "Authentication failed.") }

// saslStart begins a conversation for db's user; it is also hello's speculative
// authentication. It returns the reply fields.
func saslStart(ctx context.Context, env *Env, db string, cmd bsoncore.Document) ([]byte, error) {
	st, c := env.State, env.Conn
	mv := lookupValue(cmd, "mechanism")
	mech, ok := mv.StringValueOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "Missing required field 'mechanism'")
	}
	if mech != auth.MechSCRAMSHA1 && mech != auth.MechSCRAMSHA256 || !mechanismEnabled(st, mech) {
		return nil, mongoerr.Newf(mongoerr.MechanismUnavailable,
			"Received authentication for mechanism %s which is not enabled", mech)
	}
	payload, err := saslPayload(cmd, "saslStart")
	if err != nil {
		return nil, err
	}
	skip := false
	if od, ok := lookupValue(cmd, "options").DocumentOK(); ok {
		skip = Truthy(od.Lookup("skipEmptyExchange"))
	}
	a := &st.Auth
	user := auth.UserName{DB: db}
	conv, err := auth.NewConversation(mech, func(name string) (auth.Credential, error) {
		user.User = name
		if prev := c.AuthUser(); prev != nil && *prev != user {
			return auth.Credential{}, mongoerr.Newf(mongoerr.Location5626701,
				"Each client connection may only be authenticated once. Previously authenticated as: %s", prev)
		}
		cu, ok, err := a.lookupUser(ctx, st, user)
		if err != nil {
			return auth.Credential{}, err
		}
		if !ok {
			return auth.Credential{}, auth.ErrUnknownUser
		}
		cred, ok := cu.user.Credentials[mech]
		if !ok {
			return auth.Credential{}, mongoerr.Newf(mongoerr.MechanismUnavailable,
				"Unable to use %s based authentication for user without any %s credentials registered", mech, mech)
		}
		return cred, nil
	})
	if err != nil {
		return nil, err
	}
	reply, err := conv.Step(payload)
	if err != nil {
		a.Counters.count(mech, false)
		logAuthFailure(st, c, mech, user, err)
		if me, ok := mongoerr.As(err); ok && me.Code == mongoerr.Location5626701 {
			return nil, err
		}
		return nil, authFailed()
	}
	c.mu.Lock()
	id := int32(1)
	if c.sasl != nil {
		id = c.sasl.id + 1
	}
	c.sasl = &saslState{id: id, conv: conv, user: user, skip: skip}
	c.mu.Unlock()
	return appendSaslReply(nil, id, false, reply), nil
}

func runSaslStart(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.DB == "$external" {
		return nil, mongoerr.New(mongoerr.MechanismUnavailable, "SCRAM authentication is not available on the $external database")
	}
	fields, err := saslStart(ctx, env, env.DB, cmd)
	if err != nil {
		return nil, err
	}
	return docOf(fields), nil
}

func runSaslContinue(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	st, c := env.State, env.Conn
	c.mu.Lock()
	s := c.sasl
	c.mu.Unlock()
	if s == nil {
		return nil, mongoerr.New(mongoerr.ProtocolError, "No SASL session state found")
	}
	idv := lookupValue(cmd, "conversationId")
	id, ok := idv.AsInt64OK()
	if !ok || int32(id) != s.id {
		c.mu.Lock()
		c.sasl = nil
		c.mu.Unlock()
		return nil, mongoerr.New(mongoerr.ProtocolError, "sasl: Mismatched conversation id")
	}
	payload, err := saslPayload(cmd, "saslContinue")
	if err != nil {
		return nil, err
	}
	finish := func(done bool, reply string) (bsoncore.Document, error) {
		if done {
			u := s.user
			c.setAuthUser(&u)
			c.mu.Lock()
			c.sasl = nil
			c.mu.Unlock()
			st.Auth.Counters.count(s.conv.Mechanism, true)
			st.Logger.Info("Successfully authenticated", logv2.C(logv2.Access), logv2.ID(5286306), logv2.Ctx(c.Desc()),
				"client", c.Remote, "mechanism", s.conv.Mechanism, "user", u.User, "db", u.DB)
		}
		return docOf(appendSaslReply(nil, s.id, done, reply)), nil
	}
	if s.proved {
		// The empty exchange that ends a conversation without skipEmptyExchange.
		if payload != "" {
			return nil, failSasl(st, c, s, mongoerr.New(mongoerr.BadValue, "non-empty final client message"))
		}
		return finish(true, "")
	}
	reply, err := s.conv.Step(payload)
	if err != nil || !s.conv.Valid() {
		if err == nil {
			err = mongoerr.New(mongoerr.AuthenticationFailed, "invalid proof")
		}
		return nil, failSasl(st, c, s, err)
	}
	s.proved = true
	return finish(s.skip, reply)
}

// failSasl ends c's conversation s after a failure and returns the client's error (always
// AuthenticationFailed: what failed is logged, not told).
func failSasl(st *State, c *Conn, s *saslState, why error) error {
	c.mu.Lock()
	c.sasl = nil
	c.mu.Unlock()
	st.Auth.Counters.count(s.conv.Mechanism, false)
	logAuthFailure(st, c, s.conv.Mechanism, s.user, why)
	return authFailed()
}

func runAuthenticate(_ context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	mech, _ := lookupValue(cmd, "mechanism").StringValueOK()
	if mech == "MONGODB-X509" {
		return nil, mongoerr.New(mongoerr.MechanismUnavailable,
			"Received authentication for mechanism MONGODB-X509 which is not enabled")
	}
	return nil, mongoerr.Newf(mongoerr.BadValue, "Unsupported mechanism %s on authenticate command", mech)
}

func runLogout(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
	c := env.Conn
	c.setAuthUser(nil)
	c.mu.Lock()
	c.sasl = nil
	c.mu.Unlock()
	return docOf(nil), nil
}

// runConnectionStatus reports the connection's user and its roles (and privileges with
// showPrivileges).
func runConnectionStatus(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	showPrivs := Truthy(lookupValue(cmd, "showPrivileges"))
	s, err := env.State.Auth.Session(ctx, env.State, env.Conn)
	if err != nil {
		return nil, err
	}
	if !env.State.Auth.Enabled {
		// Authorization off: still report who authenticated (a driver with credentials).
		s.User = env.Conn.AuthUser()
		if s.User != nil {
			if cu, ok, err := env.State.Auth.lookupUser(ctx, env.State, *s.User); err == nil && ok {
				s.privs, s.roles, s.direct = cu.resolved.Privileges, cu.resolved.Roles, cu.user.Roles
			}
		}
	}
	var b []byte
	idx, b := bsoncore.AppendDocumentElementStart(b, "authInfo")
	b = auth.AppendUserNames(b, "authenticatedUsers", s.Users())
	// The user's granted roles, as mongod lists them (inherited ones show in the privileges).
	b = auth.AppendRoleNames(b, "authenticatedUserRoles", s.direct)
	if showPrivs {
		b = auth.AppendPrivileges(b, "authenticatedUserPrivileges", s.privs.List())
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return docOf(b), nil
}

// appendHelloAuth appends hello's saslSupportedMechs (the named user's mechanisms; absent
// when the user does not exist) and speculativeAuthenticate (the first saslStart's reply;
// absent when it fails: the driver then authenticates the ordinary way).
func appendHelloAuth(ctx context.Context, b []byte, env *Env, cmd bsoncore.Document) []byte {
	st := env.State
	if s, ok := lookupValue(cmd, "saslSupportedMechs").StringValueOK(); ok {
		if db, user, ok := strings.Cut(s, "."); ok {
			if cu, ok, err := st.Auth.lookupUser(ctx, st, auth.UserName{User: user, DB: db}); err == nil && ok {
				var mechs []string
				for _, m := range cu.user.Mechanisms() {
					if mechanismEnabled(st, m) {
						mechs = append(mechs, m)
					}
				}
				b = appendStrings(b, "saslSupportedMechs", mechs)
			}
		}
	}
	if sd, ok := lookupValue(cmd, "speculativeAuthenticate").DocumentOK(); ok {
		db, _ := sd.Lookup("db").StringValueOK()
		if _, isStart := sd.LookupErr("saslStart"); isStart == nil && db != "" {
			if fields, err := saslStart(ctx, env, db, sd); err == nil {
				b = bsoncore.AppendDocumentElement(b, "speculativeAuthenticate", docOf(fields))
			}
		}
	}
	return b
}

func docOf(fields []byte) bsoncore.Document {
	b := make([]byte, 0, len(fields)+5)
	idx, b := bsoncore.AppendDocumentStart(b)
	b = append(b, fields...)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// secretFields are the top-level fields whose values must never reach a log line or
// currentOp (MongoDB's redactForLogging of the user management and SASL commands).
var secretFields = map[string]bool{"pwd": true, "payload": true}

// RedactSecrets returns cmd with the values of password and SASL payload fields replaced by
// "xxx"; cmd itself when it has none.
func RedactSecrets(cmd bsoncore.Document) bsoncore.Document {
	// Two lookups and no allocation for the usual command: this runs for every command.
	_, e1 := cmd.LookupErr("pwd")
	_, e2 := cmd.LookupErr("payload")
	if e1 != nil && e2 != nil {
		return cmd
	}
	elems, err := cmd.Elements()
	if err != nil {
		return cmd
	}
	out := make([]byte, 0, len(cmd))
	idx, out := bsoncore.AppendDocumentStart(out)
	for _, e := range elems {
		if secretFields[e.Key()] {
			out = bsoncore.AppendStringElement(out, e.Key(), "xxx")
			continue
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}
