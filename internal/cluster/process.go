package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Bounds on process lifecycle waits, so a wedged process cannot hang a test.
const (
	defaultStartTimeout = 30 * time.Second
	stopTimeout         = 30 * time.Second // SIGTERM to exit, before falling back to SIGKILL
	killTimeout         = 10 * time.Second // SIGKILL to reaped
	tailLines           = 50
)

// exitPortInUse is humongod's (and mongod's) exit code when the port cannot be bound.
const exitPortInUse = 48

// ProcessOptions configure a humongod or humongos process.
type ProcessOptions struct {
	// Name labels the process in logs ("n0", "cfg1", "router0") and names its directory.
	Name string
	// Binary is the executable's path (see BuildBinaries).
	Binary string
	// Dir is the parent directory of the process's own directory, which holds its dbpath
	// ("db") and log ("<name>.log").
	Dir string
	// Port is the TCP port; 0 picks an ephemeral one on first start, kept across restarts.
	Port int
	// Args are extra flags, after --port and --dbpath.
	Args []string
	// NoDBPath omits --dbpath (for humongos).
	NoDBPath bool
	// StartTimeout bounds each start until "Waiting for connections"; default 30s.
	StartTimeout time.Duration
}

// Process is one humongod/humongos child process. Its methods are safe for concurrent use.
type Process struct {
	opts    ProcessOptions
	dir     string
	dbPath  string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	port   int
	paused bool
	starts int
	// exited is closed when the current incarnation has exited and its log is drained;
	// state is its exit status, written before exited closes (so readable without mu after).
	exited chan struct{}
	state  *exitState
}

type exitState struct{ ps *os.ProcessState }

// NewProcess prepares a process without starting it.
func NewProcess(opts ProcessOptions) (*Process, error) {
	if opts.Binary == "" || opts.Dir == "" || opts.Name == "" {
		return nil, errors.New("cluster: ProcessOptions need Binary, Dir and Name")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	dir := filepath.Join(opts.Dir, opts.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	closed := make(chan struct{})
	close(closed)
	return &Process{
		opts:    opts,
		dir:     dir,
		dbPath:  filepath.Join(dir, "db"),
		logPath: filepath.Join(dir, opts.Name+".log"),
		port:    opts.Port,
		exited:  closed,
		state:   &exitState{},
	}, nil
}

// StartProcess starts a process for a test: it is killed when the test ends, and when the test
// failed the tail of its log is printed.
func StartProcess(t testing.TB, opts ProcessOptions) *Process {
	t.Helper()
	p, err := NewProcess(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("--- last %d lines of %s (%s) ---\n%s", tailLines, p.opts.Name, p.logPath, strings.Join(p.Tail(tailLines), "\n"))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout+killTimeout)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", opts.Name, err)
	}
	return p
}

// Name is the process's label.
func (p *Process) Name() string { return p.opts.Name }

// Port is the bound port (known after the first start).
func (p *Process) Port() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.port
}

// Addr is "127.0.0.1:port".
func (p *Process) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port()) }

// URI is a connection string to this process alone.
func (p *Process) URI() string { return "mongodb://" + p.Addr() + "/?directConnection=true" }

// DBPath is the process's data directory, kept across restarts.
func (p *Process) DBPath() string { return p.dbPath }

// LogPath is the file receiving the process's stdout and stderr, across restarts.
func (p *Process) LogPath() string { return p.logPath }

// PID is the current incarnation's process id (0 if never started).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the current incarnation has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// ExitState is the last incarnation's exit status (nil while running or never started).
func (p *Process) ExitState() *os.ProcessState {
	p.mu.Lock()
	ch, st := p.exited, p.state
	p.mu.Unlock()
	select {
	case <-ch:
		return st.ps
	default:
		return nil
	}
}

// Start starts the process (it must not be running) and waits until it logs "Waiting for
// connections" with its port. The first start with Port 0 learns the ephemeral port; later
// starts reuse it.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
	default:
		return fmt.Errorf("%s is already running", p.opts.Name)
	}
	return p.startLocked(ctx)
}

func (p *Process) startLocked(ctx context.Context) error {
	args := []string{"--port", strconv.Itoa(p.port)}
	if !p.opts.NoDBPath {
		args = append(args, "--dbpath", p.dbPath)
	}
	args, err := withKeyfile(append(args, p.opts.Args...))
	if err != nil {
		return err
	}

	logf, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(logf, "=== cluster harness: start #%d at %s: %s %s\n", p.starts,
		time.Now().Format(time.RFC3339Nano), p.opts.Binary, strings.Join(args, " "))
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logf.Close()
		return err
	}
	cmd := exec.Command(p.opts.Binary, args...)
	cmd.Dir = p.dir
	cmd.Stdout = pw // an *os.File: the child writes to it directly, no copying goroutine in exec
	cmd.Stderr = pw
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.opts.Name, err)
	}
	_ = pw.Close() // the child holds the write end; EOF comes when it exits

	ready := make(chan int, 1)
	logDone := make(chan struct{})
	go copyLog(pr, logf, ready, logDone)
	exited, state := make(chan struct{}), &exitState{}
	p.cmd, p.exited, p.state, p.paused = cmd, exited, state, false
	// The waiter owns the incarnation: it reaps the child, waits for the log to drain and then
	// announces the exit. It takes no lock (callers wait for `exited` while holding p.mu), and
	// it ends because every path kills the child eventually (Kill, Stop, test cleanup,
	// Pdeathsig).
	go func() {
		_ = cmd.Wait()
		<-logDone
		_ = pr.Close()
		_ = logf.Close()
		state.ps = cmd.ProcessState
		close(exited)
	}()

	timer := time.NewTimer(p.opts.StartTimeout)
	defer timer.Stop()
	select {
	case port := <-ready:
		if p.port != 0 && port != p.port {
			p.killLocked()
			return fmt.Errorf("%s listens on port %d, asked for %d", p.opts.Name, port, p.port)
		}
		p.port = port
		return nil
	case <-exited:
		return &StartError{Name: p.opts.Name, State: cmd.ProcessState, Tail: p.Tail(tailLines)}
	case <-timer.C:
		p.killLocked()
		return fmt.Errorf("%s: no \"Waiting for connections\" within %v; log tail:\n%s", p.opts.Name, p.opts.StartTimeout, strings.Join(p.Tail(tailLines), "\n"))
	case <-ctx.Done():
		p.killLocked()
		return fmt.Errorf("start %s: %w", p.opts.Name, ctx.Err())
	}
}

// StartError is a process that exited before it was ready.
type StartError struct {
	Name  string
	State *os.ProcessState
	Tail  []string
}

// ExitCode is the process's exit code (-1 if it died of a signal).
func (e *StartError) ExitCode() int { return e.State.ExitCode() }

func (e *StartError) Error() string {
	return fmt.Sprintf("%s exited during startup (%v); log tail:\n%s", e.Name, e.State, strings.Join(e.Tail, "\n"))
}

// copyLog copies the child's output to the log file line by line, reporting the port of the
// first "Waiting for connections" line (MongoDB logv2: {"msg": ..., "attr": {"port": N}}).
func copyLog(r io.Reader, w io.Writer, ready chan<- int, done chan<- struct{}) {
	defer close(done)
	br := bufio.NewReaderSize(r, 64<<10)
	found := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			_, _ = w.Write(line)
			if !found && err == nil {
				if port, ok := readyPort(line); ok {
					found = true
					ready <- port
				}
			}
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue // an over-long line: copied in pieces, never parsed
			}
			return
		}
	}
}

func readyPort(line []byte) (int, bool) {
	if !strings.Contains(string(line), "Waiting for connections") {
		return 0, false
	}
	var rec struct {
		Msg  string `json:"msg"`
		Attr struct {
			Port int `json:"port"`
		} `json:"attr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != "Waiting for connections" || rec.Attr.Port == 0 {
		return 0, false
	}
	return rec.Attr.Port, true
}

// WaitReady waits until the process accepts a connection and answers hello, retrying until
// ctx ends.
func (p *Process) WaitReady(ctx context.Context) error {
	var last error
	for attempt := 0; ; attempt++ {
		if !p.Running() {
			return fmt.Errorf("%s is not running (%v)", p.opts.Name, p.ExitState())
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = hello(actx, p.URI())
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last error: %v)", p.opts.Name, ctx.Err(), last)
		case <-time.After(min(time.Duration(attempt+1)*20*time.Millisecond, 200*time.Millisecond)):
		}
	}
}

// hello opens a fresh direct connection to uri and runs hello on it.
func hello(ctx context.Context, uri string) error {
	timeout := 2 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	// The minimum heartbeat bounds Disconnect: the driver's monitor can miss the cancel of its
	// awaitable hello (maxAwaitTimeMS = heartbeat interval, 10s by default), and Disconnect
	// waits for it whatever its context says, which made WaitReady take ~10s at random.
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(timeout).SetConnectTimeout(timeout).
		SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = cl.Disconnect(dctx)
		cancel()
	}()
	return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Err()
}

// Kill sends SIGKILL and waits (bounded) until the process is reaped. Killing a process that
// is not running is a no-op.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killLocked()
}

func (p *Process) killLocked() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	return p.waitExitLocked(killTimeout)
}

// waitExitLocked waits, bounded, for the current incarnation to exit. It releases p.mu while
// waiting so that status methods (Running, Port) stay responsive.
func (p *Process) waitExitLocked(timeout time.Duration) error {
	ch := p.exited
	p.mu.Unlock()
	defer p.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %v", p.opts.Name, timeout)
	}
}

// Stop shuts the process down gracefully: SIGTERM (after SIGCONT if paused), then waits until
// it exits or ctx ends, falling back to SIGKILL. The error reports a non-zero exit.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked(ctx)
}

func (p *Process) stopLocked(ctx context.Context) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	ch := p.exited
	p.mu.Unlock()
	timer := time.NewTimer(stopTimeout)
	var timedOut error
	select {
	case <-ch:
	case <-ctx.Done():
		timedOut = ctx.Err()
	case <-timer.C:
		timedOut = fmt.Errorf("no exit within %v of SIGTERM", stopTimeout)
	}
	timer.Stop()
	p.mu.Lock()
	if timedOut != nil {
		if err := p.killLocked(); err != nil {
			return err
		}
		return fmt.Errorf("stop %s: %v; killed", p.opts.Name, timedOut)
	}
	if st := p.state.ps; st != nil && !st.Success() {
		return fmt.Errorf("stop %s: %v", p.opts.Name, st)
	}
	return nil
}

// Pause freezes the process with SIGSTOP: its sockets stay open but nothing is answered, as
// with a long GC pause or a VM stall. It returns once the kernel reports the process stopped.
func (p *Process) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return fmt.Errorf("pause %s: not running", p.opts.Name)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.paused = true
	return waitStopped(p.cmd.Process.Pid, time.Second)
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return fmt.Errorf("resume %s: not running", p.opts.Name)
	}
	p.paused = false
	return p.cmd.Process.Signal(syscall.SIGCONT)
}

// Paused reports whether the process was paused and not resumed since.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.runningLocked()
}

func (p *Process) runningLocked() bool {
	select {
	case <-p.exited:
		return false
	default:
		return p.cmd != nil
	}
}

// Restart stops the process if it is running (gracefully; call Kill first for a crash) and
// starts it again on the same dbpath and port. A port still held briefly by the old
// incarnation's sockets is retried until ctx ends.
func (p *Process) Restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.stopLocked(ctx); err != nil {
		// A failed clean shutdown is still a stopped process; the caller learns of it.
		if p.runningLocked() {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		err := p.startLocked(ctx)
		var se *StartError
		if err == nil || !errors.As(err, &se) || se.ExitCode() != exitPortInUse {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart %s: %w (last: %v)", p.opts.Name, ctx.Err(), err)
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// Tail returns up to the last n lines of the process's log.
func (p *Process) Tail(n int) []string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return []string{fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// Connect returns a client connected directly to uri, disconnected when the test ends.
func Connect(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	// A short heartbeat (the driver's minimum) notices kills and restarts quickly, and keeps
	// Disconnect from waiting out a 10s heartbeat against a dead server.
	cl, err := mongo.Connect(withInternalAuth(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second).
		SetHeartbeatInterval(500 * time.Millisecond)))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() {
		// After an operation timed out against a paused or killed server, the driver's
		// Disconnect can wait ~10s for that connection; the bound keeps cleanups quick.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	return cl
}
