// Package server is the role-neutral network front end of humongod and humongos (MongoDB's
// transport layer and service_entry_point_common): the listeners, TLS on them as
// net.tls.mode says (tls.go: TLS and plain clients told apart on one port by their first
// message header, the handshake in the connection's goroutine), one goroutine per client
// connection, message dispatch over the command registry value its binary built
// (service.Registry), the single boundary where errors become {ok: 0, errmsg, code,
// codeName} replies, the failCommand fail point, and clean shutdown. What depends on the
// role (a data node's replication gate, read and write concern, $clusterTime gossip) it asks
// of a service.Role; it imports neither the command handlers nor replication.
//
// Ownership. The Server owns every goroutine it starts: one accept loop per listener and one
// goroutine per connection, all counted in one WaitGroup; a connection whose command runs
// past 50 ms also runs a watcher that interrupts the command if the client disconnects
// (peerWatch), which the connection stops before it reads again; and one memory releaser that
// returns the heap to the OS after large messages (inflight.go: large messages also wait for
// room in an in-flight byte budget before their body is read). Shutdown stops the accept loops,
// wakes idle connections (a read deadline in the past), interrupts the running commands
// (InterruptedAtShutdown), waits a bounded time for them to end, closes every socket and
// finally closes the registered Closers (the storage engine) in reverse order. After Shutdown
// returns no goroutine of the server is running.
//
// There is no spec section for the network layer; behaviour follows MongoDB 7.0's
// ServiceEntryPoint and transport layer.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// Closer is something the server closes at the end of shutdown, after the last command has
// finished: the storage engine, the catalog.
type Closer interface{ Close() error }

// Config configures a Server. State, Registry and Role are required; zero values of the
// rest mean mongod's defaults.
type Config struct {
	// Name is the binary's name for logs and test failures (default "humongod").
	Name string
	// BindIPs are the addresses to listen on (default 127.0.0.1).
	BindIPs []string
	// Port is the TCP port; 0 picks an ephemeral port (see Server.Port).
	Port int
	// State is the server-wide state the binary built (service.NewState or its role's
	// wrapper). New fills the fields that depend on the listeners: Host, Port, Shutdown and
	// ShutdownStarted.
	State *service.State
	// Registry is the command registry the server dispatches over.
	Registry *service.Registry
	// Role supplies the per-command hooks of the role the server plays.
	Role service.Role
	// Closers are closed in reverse order at the end of shutdown (the storage engine).
	Closers []Closer
	// ShutdownTimeout bounds the wait for interrupted in-flight commands to end on a
	// signal-initiated shutdown before their sockets are closed (default 15 s); the shutdown
	// command passes its own timeoutSecs.
	ShutdownTimeout time.Duration
	// Quiet lowers connection accept/end logs to debug, as mongod --quiet does.
	Quiet bool
	// InFlightMessageBytes bounds the bytes of large messages read and run at once (default
	// DefaultInFlightMessageBytes; see inflight.go).
	InFlightMessageBytes int64
	// TLS is net.tls: the zero value accepts plain connections only (see tls.go).
	TLS TLS
}

// Server is the front end of one humongod or humongos process.
type Server struct {
	cfg      Config
	log      *slog.Logger
	state    *service.State
	registry *service.Registry
	role     service.Role

	listeners []net.Listener
	port      int

	// rootCtx is the parent of every connection's context; cancelling it interrupts every
	// operation (the last resort of shutdown).
	rootCtx    context.Context
	rootCancel context.CancelCauseFunc

	wg sync.WaitGroup // accept loops, connection goroutines and the memory releaser

	// inflight bounds large messages in flight; its releaser goroutine returns their memory
	// to the OS once they are done.
	inflight *byteBudget

	mu       sync.Mutex
	conns    map[*conn]struct{}
	closing  bool // set under mu when shutdown begins: no new connections are registered
	started  bool
	reqID    atomic.Int32
	shutOnce sync.Once
	// shutdownStarted is closed when shutdown begins; done when it has completed.
	shutdownStarted chan struct{}
	done            chan struct{}
	shutdownErr     error
}

// New binds the listeners (so Port is known at once) but does not accept connections until
// Start.
func New(cfg Config) (*Server, error) {
	if cfg.State == nil || cfg.Registry == nil || cfg.Role == nil {
		return nil, errors.New("server: Config.State, Registry and Role are required")
	}
	if cfg.Name == "" {
		cfg.Name = "humongod"
	}
	if len(cfg.BindIPs) == 0 {
		cfg.BindIPs = []string{"127.0.0.1"}
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 15 * time.Second
	}
	if cfg.InFlightMessageBytes <= 0 {
		cfg.InFlightMessageBytes = DefaultInFlightMessageBytes
	}
	if cfg.TLS.Mode != TLSDisabled && cfg.TLS.Config == nil {
		return nil, fmt.Errorf("server: TLS mode %s without a TLS configuration", cfg.TLS.Mode)
	}
	s := &Server{
		cfg:             cfg,
		log:             cfg.State.Logger,
		state:           cfg.State,
		registry:        cfg.Registry,
		role:            cfg.Role,
		conns:           map[*conn]struct{}{},
		inflight:        newByteBudget(cfg.InFlightMessageBytes),
		shutdownStarted: make(chan struct{}),
		done:            make(chan struct{}),
	}
	s.rootCtx, s.rootCancel = context.WithCancelCause(context.Background())

	port := cfg.Port
	for _, ip := range cfg.BindIPs {
		ln, err := net.Listen(listenNetwork(ip), net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			for _, l := range s.listeners {
				_ = l.Close()
			}
			return nil, mongoerr.Newf(mongoerr.SocketException, "Failed to set up listener on %s:%d: %w", ip, port, err)
		}
		// With port 0 the first listener picks the port and the others reuse it, so every
		// bind address serves the same port as in mongod.
		if port == 0 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
		s.listeners = append(s.listeners, ln)
	}
	s.port = port

	host, _ := os.Hostname()
	s.state.Host = host + ":" + strconv.Itoa(port)
	s.state.Port = port
	s.state.ShutdownStarted = s.shutdownStarted
	s.state.Shutdown = func(force bool, timeout time.Duration) { s.beginShutdown(force, timeout) }
	return s, nil
}

// Port returns the bound TCP port (the actual one when Config.Port was 0).
func (s *Server) Port() int { return s.port }

// Addr returns the first listener's address.
func (s *Server) Addr() net.Addr { return s.listeners[0].Addr() }

// State returns the shared server state (for tests and for wiring other subsystems).
func (s *Server) State() *service.State { return s.state }

// Registry returns the command registry the server dispatches over.
func (s *Server) Registry() *service.Registry { return s.registry }

// Done is closed when shutdown has completed (whoever started it).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns the shutdown error (closing a Closer failed), after Done.
func (s *Server) Err() error {
	<-s.done
	return s.shutdownErr
}

// Start begins accepting connections and logs "Waiting for connections".
func (s *Server) Start() {
	s.mu.Lock()
	if s.started || s.closing {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.wg.Add(len(s.listeners) + 1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.inflight.releaseMemory(s.shutdownStarted)
	}()
	for _, ln := range s.listeners {
		s.log.Info("Listening on", logv2.C(logv2.Network), logv2.ID(23015), logv2.Ctx("listener"),
			"address", ln.Addr().String())
		go s.acceptLoop(ln)
	}
	ssl := "off"
	if s.cfg.TLS.Mode != TLSDisabled {
		ssl = "on"
	}
	s.log.Info("Waiting for connections", logv2.C(logv2.Network), logv2.ID(23016), logv2.Ctx("listener"),
		"port", s.port, "ssl", ssl)
}

func (s *Server) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE) must not spin: back off, bounded, and retry unless
			// shutdown begins meanwhile.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("Error accepting new connection", logv2.C(logv2.Network), logv2.ID(23023),
				logv2.Ctx("listener"), "error", err)
			select {
			case <-time.After(backoff):
				continue
			case <-s.shutdownStarted:
				return
			}
		}
		backoff = 0
		s.startConn(nc)
	}
}

// startConn registers and starts a connection, or closes it when shutting down or full.
func (s *Server) startConn(nc net.Conn) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	if len(s.conns) >= s.state.MaxIncomingConnections {
		n := len(s.conns)
		s.mu.Unlock()
		s.log.Info("Connection refused because there are too many open connections",
			logv2.C(logv2.Network), logv2.ID(22942), logv2.Ctx("listener"), "remote", nc.RemoteAddr().String(),
			"connectionCount", n)
		_ = nc.Close()
		return
	}
	c := s.newConn(nc)
	s.conns[c] = struct{}{}
	count := len(s.conns)
	s.wg.Add(1)
	s.mu.Unlock()
	s.state.Counters.ConnsCreated.Add(1)
	s.connLog("Connection accepted", 22943, "listener", "remote", c.info.Remote,
		"connectionId", c.info.ID, "connectionCount", count)
	go s.serveConn(c)
}

func (s *Server) removeConn(c *conn) int {
	s.mu.Lock()
	delete(s.conns, c)
	n := len(s.conns)
	s.mu.Unlock()
	s.state.Clients.Remove(c.info)
	return n
}

// connLog logs connection lifecycle lines, which --quiet demotes to debug.
func (s *Server) connLog(msg string, id int, ctx string, args ...any) {
	level := slog.LevelInfo
	if s.cfg.Quiet || s.state.Params.Bool("quiet") {
		level = slog.LevelDebug
	}
	args = append([]any{logv2.C(logv2.Network), logv2.ID(id), logv2.Ctx(ctx)}, args...)
	s.log.Log(context.Background(), level, msg, args...)
}

// Shutdown shuts the server down cleanly (see the package comment) and waits until it is
// done or ctx ends. In-flight commands are interrupted and get up to Config.ShutdownTimeout
// (or until ctx's deadline if sooner) to end before their connections are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	timeout := s.cfg.ShutdownTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	s.beginShutdown(false, timeout)
	select {
	case <-s.done:
		return s.shutdownErr
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close shuts down without waiting for in-flight commands and returns once done.
func (s *Server) Close() error {
	s.beginShutdown(true, 0)
	<-s.done
	return s.shutdownErr
}

// beginShutdown starts the shutdown sequence once; later calls are no-ops. It does not wait.
func (s *Server) beginShutdown(force bool, timeout time.Duration) {
	s.shutOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		close(s.shutdownStarted)
		if force {
			timeout = 0
		}
		// The sequence runs on its own goroutine so the shutdown command's connection can
		// return (and close) while it waits for the other connections.
		go s.shutdown(timeout)
	})
}

func (s *Server) shutdown(drain time.Duration) {
	defer close(s.done)
	l := s.log.With(logv2.Ctx("SignalHandler"))
	l.Info("Shutting down", logv2.C(logv2.Control), logv2.ID(4784900), "drainTimeoutMillis", drain)
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	l.Info("Shutdown: going to close listening sockets", logv2.C(logv2.Network), logv2.ID(23017))

	// Wake idle connections: a read deadline in the past ends a blocked read, and a
	// connection busy with a command fails its next read once it has replied.
	past := time.Unix(1, 0)
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.SetReadDeadline(past)
	}
	s.mu.Unlock()

	// Interrupt what is running now, as mongod does at shutdown (killAllOperations): a
	// long query must not hold the process up. Every connection's context descends from
	// rootCtx, so commands that begin after this are interrupted too.
	cause := mongoerr.New(mongoerr.InterruptedAtShutdown, "interrupted at shutdown")
	s.state.Clients.KillAll(cause)
	s.rootCancel(cause)

	allDone := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(allDone)
	}()
	timer := time.NewTimer(drain)
	select {
	case <-allDone:
		timer.Stop()
	case <-timer.C:
		l.Info("Closing connections still busy at shutdown", logv2.C(logv2.Command), logv2.ID(4695300))
		s.mu.Lock()
		for c := range s.conns {
			_ = c.nc.Close()
		}
		s.mu.Unlock()
		<-allDone
	}
	s.role.Shutdown()

	var errs []error
	for i := len(s.cfg.Closers) - 1; i >= 0; i-- {
		if err := s.cfg.Closers[i].Close(); err != nil {
			l.Error("Error closing at shutdown", logv2.C(logv2.Storage), logv2.ID(22261), "error", err)
			errs = append(errs, err)
		}
	}
	s.shutdownErr = errors.Join(errs...)
	l.Info("Now exiting", logv2.C(logv2.Control), logv2.ID(20565))
}

// String names the server for logs and test failures.
func (s *Server) String() string { return fmt.Sprintf("%s(port %d)", s.cfg.Name, s.port) }

// countingReader and countingWriter feed serverStatus.network.
// countingReader also remembers whether the socket itself failed, which the wire layer
// reports as a framing error: a peer reset is a disconnect, not a malformed message.
type countingReader struct {
	r      io.Reader
	n      *atomic.Int64
	ioFail *bool
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if err != nil && err != io.EOF {
		*c.ioFail = true
	}
	return n, err
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// listenNetwork is the network to listen on ip with: "tcp4" for an IPv4 address and "tcp6"
// for an IPv6 one, so that each listens on its own family only (Go's "tcp" makes 0.0.0.0 a
// dual-stack socket, which also takes the port on IPv6 and then conflicts with "::", where
// mongod's 0.0.0.0 is IPv4 only); "tcp" for a host name.
func listenNetwork(ip string) string {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return "tcp"
	case a.Is4():
		return "tcp4"
	}
	return "tcp6"
}
