package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"humongo/internal/logv2"
	"humongo/internal/service"
)

// Exit codes, as mongod's and mongos's ExitCode enum.
const (
	ExitClean      = 0
	ExitBadOptions = 2
	ExitNetError   = 48 // the port could not be bound
	ExitUncaught   = 100
)

// shutdownTimeout bounds the clean shutdown a signal starts.
const shutdownTimeout = 30 * time.Second

// OptionsFailed reports an error from parsing the options on stderr and returns the exit
// code: ExitBadOptions for ErrBadOptions, ExitClean for ErrHelp (the help is printed),
// ExitUncaught otherwise.
func OptionsFailed(err error, stderr io.Writer) int {
	if errors.Is(err, ErrHelp) {
		return ExitClean
	}
	// mongod prints the message alone.
	fmt.Fprintln(stderr, strings.TrimPrefix(err.Error(), ErrBadOptions.Error()+": "))
	if errors.Is(err, ErrBadOptions) {
		return ExitBadOptions
	}
	return ExitUncaught
}

// PrintVersion writes --version's output; name is how the process calls itself there ("db"
// for mongod, "mongos").
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintf(w, "%s version v%s\nBuild Info: {\"version\": %q, \"gitVersion\": %q, \"environment\": {\"distarch\": %q, \"target_os\": %q}}\n",
		name, service.Version, service.Version, service.GitVersion, runtime.GOARCH, runtime.GOOS)
}

// SetParameters applies the setParameter pairs to params in order. An error is logged as
// mongod logs it; the process then exits with ExitBadOptions.
func SetParameters(params *service.Params, pairs [][2]string, log *slog.Logger) error {
	for _, kv := range pairs {
		if err := params.SetString(kv[0], kv[1]); err != nil {
			log.Error("Error setting parameter", logv2.C(logv2.Control), logv2.ID(20574), "error", err.Error())
			return err
		}
	}
	return nil
}

// LogOptions logs the build and the effective options (getCmdLineOpts's `parsed`) at startup.
func LogOptions(log *slog.Logger, parsed []byte) {
	log.Info("Build Info", logv2.C(logv2.Control), logv2.ID(23403), "version", service.Version,
		"gitVersion", service.GitVersion, "goVersion", runtime.Version())
	log.Info("Options set by command line", logv2.C(logv2.Control), logv2.ID(21951),
		"options", logv2.BSON(parsed))
}

// WarnNoAccessControl logs the startup warning every server without authentication gives.
func WarnNoAccessControl(log *slog.Logger) {
	log.Warn("Access control is not enabled for the database. Read and write access to data and configuration is unrestricted",
		logv2.C(logv2.Control), logv2.ID(22120), logv2.StartupWarning())
}

// LogWarnings logs, as startup warnings, the options given that have no effect in Humongo
// (Options.Warnings).
func LogWarnings(log *slog.Logger, o *Options) {
	for _, name := range o.Warnings {
		log.Warn("Option has no effect in Humongo and is ignored", logv2.C(logv2.Control), logv2.ID(9101001),
			logv2.StartupWarning(), "option", name)
	}
}

// Server is what Run needs of an internal/server.Server.
type Server interface {
	Start()
	// Shutdown stops the server cleanly within ctx.
	Shutdown(ctx context.Context) error
	// Done is closed when the server has stopped by itself (the shutdown command); Err is
	// then the reason, nil for a clean stop.
	Done() <-chan struct{}
	Err() error
}

// Run starts s and serves until SIGINT or SIGTERM, which shuts it down (allowing 30
// seconds), or until it stops by itself. SIGUSR1 rotates the log through sink (nil: the
// signal is ignored), at most once a second as mongod does. It logs as mongod does and
// returns the exit code: ExitClean, or ExitUncaught if the shutdown failed. Signals are
// handled on the caller's goroutine and no longer caught once Run returns.
func Run(s Server, log *slog.Logger, sink *logv2.Sink) int {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigc)
	return run(s, log, sink, sigc)
}

func run(s Server, log *slog.Logger, sink *logv2.Sink, sigc <-chan os.Signal) int {
	s.Start()
	NotifyReady()
	var err error
	var lastRotate time.Time
loop:
	for {
		select {
		case sig := <-sigc:
			signum := 0
			if n, ok := sig.(syscall.Signal); ok {
				signum = int(n)
			}
			log.Info("Received signal", logv2.C(logv2.Control), logv2.ID(23377), logv2.Ctx("SignalHandler"),
				"signal", signum, "error", sig.String())
			if sig == syscall.SIGUSR1 {
				if sink != nil && time.Since(lastRotate) > time.Second {
					lastRotate = time.Now()
					if rerr := sink.Rotate(""); rerr != nil {
						log.Error("Log rotation failed", logv2.C(logv2.Control), logv2.ID(4719800),
							logv2.Ctx("SignalHandler"), "error", rerr.Error())
					}
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			err = s.Shutdown(ctx)
			cancel()
			break loop
		case <-s.Done():
			err = s.Err()
			break loop
		}
	}
	code := ExitClean
	if err != nil {
		log.Error("Error during shutdown", logv2.C(logv2.Control), logv2.ID(4784931), "error", err.Error())
		code = ExitUncaught
	}
	log.Info("Shutting down", logv2.C(logv2.Control), logv2.ID(23138), "exitCode", code)
	return code
}
