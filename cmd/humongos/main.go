// Command humongos is Humongo's router, the mongos analog. Today it is a skeleton on the same
// front end as humongod (internal/server) with its own registry and role (internal/router):
// it answers the handshake and diagnostics (hello with msg "isdbgrid", ping, buildInfo,
// getParameter, serverStatus, listCommands) and refuses every other command with
// CommandNotSupported until sharding lands. It does not contact the config servers yet;
// --configdb is required and validated as mongos validates it.
//
// Flags: --configdb setName/host:port[,host:port], --port (default 27017), --bind_ip (default
// 127.0.0.1), --config (YAML: net.port, net.bindIp, sharding.configDB, setParameter),
// --setParameter name=value. Flags override the config file.
//
// Exit codes follow mongos: 0 clean shutdown, 2 bad options, 48 the port could not be bound.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"humongo/internal/logv2"
	"humongo/internal/router"
	"humongo/internal/server"
	"humongo/internal/service"
)

// Exit codes, as mongos's ExitCode enum.
const (
	exitClean      = 0
	exitBadOptions = 2
	exitNetError   = 48
	exitUncaught   = 100
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	opts, err := parseOptions(argv[1:], stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, errBadOptions) {
			return exitBadOptions
		}
		return exitUncaught
	}
	if opts.Version {
		fmt.Fprintf(stdout, "mongos version v%s\nBuild Info: {\"version\": %q, \"gitVersion\": %q, \"environment\": {\"distarch\": %q, \"target_os\": %q}}\n",
			service.Version, service.Version, service.GitVersion, runtime.GOARCH, runtime.GOOS)
		return exitClean
	}
	h := logv2.NewHandler(stdout, nil)
	log := slog.New(h).With(logv2.Ctx("mongosMain"))
	return serve(opts, argv, log, h.Sink())
}

func serve(opts *Options, argv []string, log *slog.Logger, sink *logv2.Sink) int {
	params := service.NewParams(router.ParamSpecs())
	for _, kv := range opts.SetParameters {
		if err := params.SetString(kv[0], kv[1]); err != nil {
			log.Error("Error setting parameter", logv2.C(logv2.Control), logv2.ID(20574), "error", err.Error())
			return exitBadOptions
		}
	}
	log.Info("Build Info", logv2.C(logv2.Control), logv2.ID(23403), "version", service.Version,
		"gitVersion", service.GitVersion, "goVersion", runtime.Version())
	log.Info("Options set by command line", logv2.C(logv2.Control), logv2.ID(21951),
		"options", logv2.BSON(opts.parsed()))
	log.Warn("Access control is not enabled for the database. Read and write access to data and configuration is unrestricted",
		logv2.C(logv2.Control), logv2.ID(22120), logv2.StartupWarning())

	st := service.NewState(service.Config{
		Params:  params,
		Logger:  log,
		LogSink: sink,
		CmdLine: service.CmdLine{Argv: argv, Parsed: opts.parsed()},
	})
	s, err := server.New(server.Config{
		Name:     "humongos",
		BindIPs:  opts.BindIPs,
		Port:     opts.Port,
		State:    st,
		Registry: router.NewRegistry(),
		Role:     router.Role{},
	})
	if err != nil {
		log.Error("Error starting the router", logv2.C(logv2.Control), logv2.ID(23091), "error", err.Error())
		return exitNetError
	}
	s.Start()

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	select {
	case sig := <-sigc:
		log.Info("Received signal", logv2.C(logv2.Control), logv2.ID(23377), logv2.Ctx("SignalHandler"),
			"signal", int(sig.(syscall.Signal)), "error", sig.String())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = s.Shutdown(ctx)
		cancel()
	case <-s.Done():
		err = s.Err()
	}
	code := exitClean
	if err != nil {
		log.Error("Error during shutdown", logv2.C(logv2.Control), logv2.ID(4784931), "error", err.Error())
		code = exitUncaught
	}
	log.Info("Shutting down", logv2.C(logv2.Control), logv2.ID(23138), "exitCode", code)
	return code
}
