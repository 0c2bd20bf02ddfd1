package service

// Env is what a handler knows about the request beyond the command body.
type Env struct {
	// DB is the command's `$db`.
	DB string
	// Name is the command name as the client spelled it (an alias possibly).
	Name    string
	Command *Command
	Conn    *Conn
	State   *State
	// Registry is the registry serving the request (listCommands lists it).
	Registry *Registry
	// Op is the in-progress operation record (currentOp/killOp).
	Op *Op
	// Auth is the connection's authorization session for this command (set by dispatch
	// when authorization is on; nil otherwise, which every check treats as allowed).
	Auth *AuthSession
	// Legacy is true when the command arrived in an OP_QUERY.
	Legacy bool
	// ExhaustAllowed is the client's OP_MSG exhaustAllowed bit.
	ExhaustAllowed bool
	// Exhaust may be set by a handler, only when ExhaustAllowed, to stream: the server sends
	// the reply with moreToCome and runs the same command again on the same connection until a
	// run leaves Exhaust false, fails, or the connection closes. Awaitable hello uses this; a
	// getMore on an exhaust cursor will too.
	Exhaust bool
	// CloseConnection may be set by a handler to make the server close the connection once
	// the command has run, without replying (the onPrimaryTransactionalWrite fail point: the
	// write commits but the client never learns it).
	CloseConnection bool
}
