// Command humongos is Humongo's router, the mongos analog, on the same front end as humongod
// (internal/server) with its own registry and role (internal/router). It answers the
// handshake and diagnostics (hello with msg "isdbgrid", ping, buildInfo, getParameter,
// serverStatus, listCommands), reaches its cluster through the config servers named by
// --configdb (internal/router.Cluster: listShards, flushRouterConfig), and refuses the other
// commands with CommandNotSupported until routing lands (issue 12).
//
// Flags: --configdb setName/host:port[,host:port], --port (default 27017), --bind_ip (default
// 127.0.0.1), --config (YAML: net.port, net.bindIp, net.tls, sharding.configDB, setParameter),
// --setParameter name=value, and mongos's TLS options (--tlsMode, --tlsCertificateKeyFile,
// --tlsCAFile, ...; internal/process), which also make its connections to the config servers
// and shards use TLS in preferTLS and requireTLS. Flags override the config file.
//
// Exit codes follow mongos: 0 clean shutdown, 2 bad options, 48 the port could not be bound.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"humongo/internal/client"
	"humongo/internal/logv2"
	"humongo/internal/process"
	"humongo/internal/router"
	"humongo/internal/server"
	"humongo/internal/service"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	opts, err := parseOptions(argv[1:], stderr)
	if err != nil {
		return process.OptionsFailed(err, stderr)
	}
	if opts.Version {
		process.PrintVersion(stdout, "mongos")
		return process.ExitClean
	}
	h := logv2.NewHandler(stdout, nil)
	log := slog.New(h).With(logv2.Ctx("mongosMain"))
	return serve(opts, argv, log, h.Sink())
}

func serve(opts *Options, argv []string, log *slog.Logger, sink *logv2.Sink) int {
	started := time.Now()
	setRouterGC(os.Getenv)
	params := service.NewParams(router.ParamSpecs())
	if err := process.SetParameters(params, opts.StartupParameters(), log); err != nil {
		return process.ExitBadOptions
	}
	process.LogOptions(log, opts.parsed())
	if !opts.Auth && opts.Key == "" {
		process.WarnNoAccessControl(log)
	}

	st := service.NewState(service.Config{
		Params:         params,
		Logger:         log,
		LogSink:        sink,
		CmdLine:        service.CmdLine{Argv: process.CensorArgv(argv), Parsed: opts.parsed()},
		ClientSecurity: opts.ClientSecurity(),
	})
	// With a keyfile the router authorizes its clients against the config servers' users,
	// and authenticates to every member as the internal user.
	st.Auth.Enabled = opts.Auth || opts.Key != ""
	router.AttachUserStore(st)
	if opts.Key != "" {
		if err := st.Auth.SetKeyfile(opts.Key); err != nil {
			log.Error("Error reading the keyfile", logv2.C(logv2.Access), "error", err.Error())
			return process.ExitBadOptions
		}
	}
	// The config servers are reached lazily (the driver connects on first use), as mongos
	// starts before its config servers answer.
	cl, err := router.NewCluster(client.ReplicaSetHosts{SetName: opts.ConfigSet, Seeds: opts.ConfigHosts},
		client.Options{AppName: "humongos", Dialer: &client.Rewriter{Security: opts.ClientSecurity()}, Clock: &st.Concern.Clock})
	if err != nil {
		log.Error("Error connecting to the config servers", logv2.C(logv2.Sharding), "error", err.Error())
		return process.ExitBadOptions
	}
	router.Attach(st, cl)
	stopReport := func() {}
	s, err := server.New(server.Config{
		Name:     "humongos",
		BindIPs:  opts.BindIPs,
		Port:     opts.Port,
		State:    st,
		Registry: router.NewRegistry(),
		Role:     router.Role{},
		Closers:  []server.Closer{closerFunc(func() { stopReport() }), closerFunc(cl.Close)},
		TLS:      opts.ServerTLS(),
	})
	if err != nil {
		log.Error("Error starting the router", logv2.C(logv2.Control), logv2.ID(23091), "error", err.Error())
		return process.ExitNetError
	}
	// The uptime reporter runs for the server's life; the first closer stops it, before the
	// cluster's clients close.
	ctx, cancel := context.WithCancel(context.Background())
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		cl.ReportUptime(ctx, s.Port(), started)
	}()
	stopReport = func() {
		cancel()
		<-reported
	}
	return process.Run(s, log, sink)
}

// closerFunc adapts a func() to server.Closer.
type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }
