// Command humongod is Humongo's data node, the mongod analog: it takes mongod's flags and
// YAML configuration (see config.go and internal/process for what is understood and the
// precedence flags > config file > defaults), locks its dbpath, serves the MongoDB wire
// protocol through internal/server (over TLS as --tlsMode says; members then use TLS to each
// other in preferTLS and requireTLS), and shuts down cleanly on SIGINT/SIGTERM or the shutdown
// command (process.Run); SIGUSR1 and the logRotate command rotate --logpath, and --fork runs
// it in the background once it is ready (process.Fork).
//
// Exit codes follow mongod: 0 clean shutdown, 2 bad options, 48 the port could not be bound,
// 100 any other startup failure, including DBPathInUse (another process holds the dbpath).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"humongo/internal/client"
	"humongo/internal/commands"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/process"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/recovery"
	"humongo/internal/server"
	"humongo/internal/service"
	"humongo/internal/sharding/shardstate"
)

// openDB opens the data directory; the server closes it last at shutdown, after every command
// has finished.
func openDB(dbpath string, log *slog.Logger, cacheBytes int64) (*operation.DB, error) {
	return operation.OpenDBWithCache(context.Background(), dbpath, log.With(logv2.C(logv2.Storage)), cacheBytes)
}

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	opts, err := parseOptions(argv[1:], stderr)
	if err != nil {
		return process.OptionsFailed(err, stderr)
	}
	if opts.Version {
		process.PrintVersion(stdout, "db")
		return process.ExitClean
	}
	if opts.Fork && !process.Forked() {
		return process.Fork(argv, stdout, stderr)
	}

	logOut, closeLog, err := opts.OpenLog(stdout)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return process.ExitBadOptions
	}
	defer closeLog()
	h := logv2.NewHandler(logOut, nil)
	log := slog.New(h).With(logv2.Ctx("initandlisten"))
	return serve(opts, argv, log, h.Sink())
}

func serve(opts *Options, argv []string, log *slog.Logger, sink *logv2.Sink) int {
	params := service.NewParams(commands.DefaultParamSpecs())
	if err := process.SetParameters(params, opts.StartupParameters(), log); err != nil {
		return process.ExitBadOptions
	}
	host, _ := os.Hostname()
	log.Info("MongoDB starting", logv2.C(logv2.Control), logv2.ID(4615611), "pid", os.Getpid(), "port", opts.Port,
		"dbPath", opts.DBPath, "architecture", "64-bit", "host", host)
	process.LogOptions(log, opts.parsed())
	// A rotated log file starts, as mongod's, with the build and the options.
	sink.SetAfterRotate(func() { process.LogOptions(log, opts.parsed()) })
	process.LogWarnings(log, opts.Options)
	if warn, err := opts.checkStorageEngine(); err != nil {
		var me *mongoerr.Error
		msg := err.Error()
		if errors.As(err, &me) {
			msg = me.Code.Name() + ": " + me.Msg
		}
		log.Error("DBException in initAndListen, terminating", logv2.C(logv2.Control), logv2.ID(20557), "error", msg)
		return process.ExitUncaught
	} else if warn {
		log.Warn("The wiredTiger storage engine is not available: Humongo runs its own storage engine (Pebble) in its place",
			logv2.C(logv2.Storage), logv2.ID(9101002), logv2.StartupWarning(), "storageEngine", opts.StorageEngine)
	}

	lock, err := lockDBPath(opts.DBPath)
	if err != nil {
		fatal(log, err)
		return process.ExitUncaught
	}
	if opts.PIDFile != "" {
		if err := os.WriteFile(opts.PIDFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			_ = lock.Close()
			log.Error("Failed to write the pid file", logv2.C(logv2.Control), logv2.ID(21976), "path", opts.PIDFile, "error", err.Error())
			return process.ExitUncaught
		}
	}
	db, err := openDB(opts.DBPath, log, opts.cacheBytes())
	if err != nil {
		_ = lock.Close()
		fatal(log, err)
		return process.ExitUncaught
	}
	if opts.ReplSet != "" {
		// Startup recovery runs before anything else can read or write (spec "Startup
		// Recovery"): the server, the TTL monitor and the coordinator start after it.
		if err := recoverReplicaSetMember(db, log); err != nil {
			_ = db.Close()
			_ = lock.Close()
			fatal(log, err)
			return process.ExitUncaught
		}
	}
	// Closed in reverse order: storage first (background work that writes through it, such as
	// the TTL monitor, stops before the engine closes), then the lock file.
	var stopBackground func()
	closeDB := closerFunc(func() error {
		if stopBackground != nil {
			stopBackground()
		}
		return db.Close()
	})
	closers := []server.Closer{lock, closeDB}
	if !opts.Auth && opts.Key == "" {
		process.WarnNoAccessControl(log)
	}

	// The binary builds the server-wide state, mongod's registry and role; the front end is
	// the same as humongos's.
	st := commands.NewState(db, service.Config{
		Params:                 params,
		Logger:                 log,
		LogSink:                sink,
		CmdLine:                service.CmdLine{Argv: process.CensorArgv(argv), Parsed: opts.parsed()},
		Compressors:            opts.Compressors,
		MaxIncomingConnections: opts.MaxConns,
		SlowOpThreshold:        time.Duration(opts.SlowMS) * time.Millisecond,
		ClientSecurity:         opts.ClientSecurity(),
	})
	// Authorization is on with --auth or a keyfile (mongod's rule); users live in this node's
	// admin.system.users, and the keyfile's key is the internal user's password.
	st.Auth.Enabled = opts.Auth || opts.Key != ""
	commands.AttachUserStore(st)
	if opts.Key != "" {
		if err := st.Auth.SetKeyfile(opts.Key); err != nil {
			fatal(log, err)
			return process.ExitUncaught
		}
	}
	registry := commands.NewRegistry()
	s, err := server.New(server.Config{
		Name:     "humongod",
		BindIPs:  opts.BindIPs,
		Port:     opts.Port,
		State:    st,
		Registry: registry,
		Role:     commands.NewRole(st),
		Closers:  closers,
		Quiet:    opts.Quiet,
		TLS:      opts.ServerTLS(),
	})
	if err != nil {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
		fatal(log, err)
		return process.ExitNetError
	}
	// mongod's own start records: local.startup_log, and the FCV document of a clean
	// standalone (so listDatabases shows local and admin as mongod does).
	if err := commands.RecordStartup(context.Background(), s.State(), opts.ReplSet == ""); err != nil {
		fatal(log, err)
		_ = s.Close()
		return process.ExitUncaught
	}
	ttl := commands.StartTTLMonitor(context.Background(), s.State())
	reaper := commands.StartCursorReaper(context.Background(), s.State())
	sessions := commands.StartSessionRefresher(context.Background(), s.State())
	stopTTL := func() {
		sessions()
		reaper()
		ttl()
	}
	stopBackground = stopTTL
	if opts.ReplSet != "" {
		// A replica-set member: the coordinator must exist before the first connection.
		self := net.JoinHostPort(advertisedHost(opts.BindIPs), strconv.Itoa(s.Port()))
		rc, err := commands.AttachReplication(context.Background(), s.State(), registry, opts.ReplSet, self,
			int64(opts.OplogSizeMB), coord.Options{Logger: log, ConfigServer: opts.ClusterRole == "configsvr",
				// This server's own host rewriter: every connection to another member dials
				// through it (testingReplicaSetHostRewrites changes it).
				Dialer: &client.Rewriter{Security: opts.ClientSecurity()}})
		if err != nil {
			fatal(log, err)
			_ = s.Close()
			return process.ExitUncaught
		}
		// Members record change stream pre-images; each expires its own.
		stopPreImages := commands.StartPreImagesRemover(context.Background(), s.State())
		stopBackground = func() {
			stopPreImages()
			rc.Close()
			stopTTL()
		}
	}
	role, _ := shardstate.ParseRole(opts.ClusterRole) // checked by parseOptions
	stopRole, err := commands.StartShardingRole(context.Background(), s.State(), registry, role, s.State().Repl)
	if err != nil {
		fatal(log, err)
		_ = s.Close()
		return process.ExitUncaught
	}
	stopRepl := stopBackground
	stopBackground = func() {
		stopRole()
		stopRepl()
	}
	return process.Run(s, log, sink)
}

// recoverReplicaSetMember runs startup recovery on a replica-set member's data (truncate
// the oplog after oplogTruncateAfterPoint, recover to the stable timestamp, replay the oplog
// to its top); see internal/repl/recovery. What follows is the coordinator's, which reads the
// same consistency markers when it installs the stored config: a member whose initial-sync
// flag is set starts in STARTUP2 and redoes initial sync, one whose data has not reached
// minValid is RECOVERING (no reads) while it replicates, until it has applied up to minValid.
func recoverReplicaSetMember(db *operation.DB, log *slog.Logger) error {
	res, err := recovery.Recover(context.Background(), recovery.Config{Engine: db.Engine, Catalog: db.Catalog,
		Colls: db.Colls, TempDir: db.TempDir, Log: log})
	if err != nil {
		return fmt.Errorf("startup recovery: %w", err)
	}
	if !res.Skipped && !res.Consistent {
		log.Warn("Data is not consistent: the top of the oplog is behind minValid; the member stays RECOVERING until it has applied up to minValid",
			logv2.C(logv2.Replication), logv2.ID(21557), "topOfOplog", res.Top.String(), "minValid", res.MinValid.String())
	}
	return nil
}

// advertisedHost is the host this member calls itself in a replica-set config: the first
// bind address unless it is a wildcard, then the machine's hostname.
func advertisedHost(bindIPs []string) string {
	if len(bindIPs) > 0 && bindIPs[0] != "0.0.0.0" && bindIPs[0] != "::" {
		return bindIPs[0]
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "localhost"
}

// closerFunc adapts a function to server.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// fatal logs a startup failure the way mongod does (severity F with the error code).
func fatal(log *slog.Logger, err error) {
	code := mongoerr.CodeOf(err)
	log.Log(context.Background(), logv2.LevelFatal, "Fatal assertion", logv2.C(logv2.Storage), logv2.ID(28595),
		"code", int(code), "codeName", code.Name(), "error", err.Error())
}
