// Command humongo is Humongo's operator tool (issues 4 and 5; ARCHITECTURE.md "Processes and
// binaries"): `up` starts a local deployment of humongod processes in one command (as mlaunch
// does for mongod) — a standalone, with --replset N a replica set it initiates and waits on
// for a primary, with --shards S a sharded cluster (shard sets, a config server set, humongos
// routers) whose shards it adds; with --tls every process serves TLS only, with a local CA's
// certificates (tls.go) — `status` and `down` inspect and stop it through the state file `up` writes,
// and `bench` runs YCSB-style workloads against any MongoDB-compatible URI (engine:
// internal/bench; this package only parses flags and prints).
//
// Exit codes: 0 success, 1 failure (for bench: any failed operation), 2 bad usage,
// 130 a benchmark interrupted by SIGINT (its partial results are still printed).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// usageError marks errors of the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `usage: humongo <command> [flags]

commands:
  up       start a local deployment: a standalone, a replica set or a sharded cluster
  status   show the processes of a deployment
  down     stop the processes of a deployment
  bench    run a YCSB-style benchmark against a MongoDB URI

Run "humongo <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one humongo command and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "up":
		err = cmdUp(ctx, args[1:], stdout, stderr)
	case "down":
		err = cmdDown(ctx, args[1:], stdout, stderr)
	case "status":
		err = cmdStatus(ctx, args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "humongo: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	var ue usageError
	var ie interruptedError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "humongo %s: %v\n", args[0], err)
		return exitUsage
	case errors.As(err, &ie):
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "humongo %s: %v\n", args[0], err)
	return exitFailure
}

// errHelp is returned when -h was asked for: the flag package printed the usage already.
var errHelp = errors.New("help requested")

// interruptedError reports a command cut short by SIGINT after it printed what it had.
type interruptedError struct{}

func (interruptedError) Error() string { return "interrupted" }
