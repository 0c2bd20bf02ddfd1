package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"humongo/internal/certs"
	"humongo/internal/router"
)

// upOptions are `humongo up`'s flags.
type upOptions struct {
	standalone bool
	replset    int // members per replica set; 0: none
	shards     int
	routers    int
	configs    int    // config server replica set members of a sharded cluster
	name       string // replica-set name prefix: sets are <name>0, <name>1, ...
	dir        string
	port       int
	ports      []int // --ports: one port per process, in plan order; overrides port
	bindIP     string
	binDir     string
	timeout    time.Duration
	extra      []string // arguments after "--", passed to every humongod (routers: routerArgs)
	// tls starts every process in requireTLS with a local CA's certificates (tls.go).
	tls bool
	// auth starts every process with a keyfile and creates a first user (auth.go).
	auth bool
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("humongo "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses and maps flag errors to usage errors (-h to errHelp).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usageError{err.Error()}
	}
	return nil
}

func parseUpFlags(args []string, stderr io.Writer) (*upOptions, error) {
	o := &upOptions{}
	fs := newFlagSet("up", stderr)
	fs.BoolVar(&o.standalone, "standalone", false, "start one standalone humongod (the default)")
	fs.IntVar(&o.replset, "replset", 0, "start a replica set of `N` members, 1..50 (with --shards: N members per shard)")
	fs.IntVar(&o.shards, "shards", 0, "start a sharded cluster of `S` shards (each a replica set of --replset members, default 1)")
	fs.IntVar(&o.routers, "routers", 1, "routers (humongos) of a sharded cluster")
	fs.IntVar(&o.configs, "config-servers", 1, "members of a sharded cluster's config server replica set, 1..50")
	fs.StringVar(&o.name, "name", "rs", "replica-set name prefix: sets are named <name>0, <name>1, ...")
	fs.StringVar(&o.dir, "dir", "./humongo-local", "directory for data, logs and the state file")
	fs.IntVar(&o.port, "port", 27017, "first port; processes take consecutive ports from here")
	portList := fs.String("ports", "", "comma-separated `list` of ports, one per process in start order (instead of --port)")
	fs.StringVar(&o.bindIP, "bind-ip", "127.0.0.1", "address every process listens on")
	fs.StringVar(&o.binDir, "bin-dir", "", "directory holding humongod (default: next to humongo, else $PATH)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long to wait for each process to become ready")
	fs.BoolVar(&o.auth, "auth", false, "turn authorization on: a keyfile made in <dir>/keyfile for every process, a first user admin (root) whose password is kept in <dir>/credentials")
	fs.BoolVar(&o.tls, "tls", false, "serve TLS only, with a local CA and certificates made in <dir>/tls (kept for the next up)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: humongo up [--standalone | --replset N | --shards S [--replset N] [--routers R] [--config-servers C]] [flags] [-- humongod flags]\n")
		fmt.Fprintf(stderr, "humongod flags go to every humongod; routers get the --setParameter ones a router knows\n")
		fs.PrintDefaults()
	}
	err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	o.extra = fs.Args()
	if len(o.extra) > 0 && (len(args) < len(o.extra)+1 || args[len(args)-len(o.extra)-1] != "--") {
		return nil, usagef("unexpected arguments %q (pass humongod flags after --)", o.extra)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["ports"] {
		if set["port"] {
			return nil, usagef("--port and --ports cannot be combined")
		}
		if o.ports, err = parsePorts(*portList); err != nil {
			return nil, err
		}
		o.port = o.ports[0]
	}
	switch {
	case set["replset"] && (o.replset < 1 || o.replset > maxMembers):
		// 0 used to fall through to a standalone: the user asked for a set, so say why not.
		return nil, usagef("--replset must be between 1 and %d members (a replica set's limit), got %d", maxMembers, o.replset)
	case set["shards"] && (o.shards < 1 || o.shards > maxShards):
		return nil, usagef("--shards must be between 1 and %d, got %d", maxShards, o.shards)
	case o.routers < 0 || o.routers > maxRouters:
		return nil, usagef("--routers must be between 0 and %d, got %d", maxRouters, o.routers)
	case o.standalone && (o.replset > 0 || o.shards > 0):
		return nil, usagef("--standalone cannot be combined with --replset or --shards")
	case o.shards > 0 && o.routers < 1:
		return nil, usagef("a sharded cluster needs at least one router")
	case o.configs < 1 || o.configs > maxMembers:
		return nil, usagef("--config-servers must be between 1 and %d members, got %d", maxMembers, o.configs)
	case o.shards == 0 && (set["config-servers"] || set["routers"]):
		return nil, usagef("--config-servers and --routers need --shards")
	case o.port < 1 || o.port > 65535:
		return nil, usagef("--port must be in 1..65535, got %d", o.port)
	case o.name == "" || strings.ContainsAny(o.name, "/ ,"):
		return nil, usagef("--name %q is not a valid replica-set name", o.name)
	}
	n := len(plan(o, ""))
	switch {
	case o.ports != nil && len(o.ports) != n:
		return nil, usagef("--ports lists %d ports for %d processes", len(o.ports), n)
	case o.ports == nil && o.port+n-1 > 65535:
		return nil, usagef("%d processes from --port %d run past port 65535", n, o.port)
	}
	return o, nil
}

// parsePorts parses --ports: distinct ports in 1..65535.
func parsePorts(list string) ([]int, error) {
	var ports []int
	seen := map[int]bool{}
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 || p > 65535 {
			return nil, usagef("--ports: %q is not a port in 1..65535", f)
		}
		if seen[p] {
			return nil, usagef("--ports lists %d twice", p)
		}
		seen[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// Bounds on deployment sizes. A replica set has at most 50 members (MongoDB's limit); the
// shard and router bounds only keep a typo (--shards 1000) from planning thousands of processes.
const (
	maxMembers = 50
	maxShards  = 64
	maxRouters = 16
)

// topology names the kind of deployment the options ask for.
func (o *upOptions) topology() string {
	switch {
	case o.shards > 0:
		return "sharded"
	case o.replset > 0:
		return "replset"
	}
	return "standalone"
}

// plan lays the deployment out: names, roles, ports and paths of every process, in start
// order. Ports are --ports in order, else consecutive from --port: data-bearing members first (shard by shard), then
// config servers, then routers. Planning is pure, so every topology's layout is settled (and
// tested) before the server side can run it.
func plan(o *upOptions, dir string) []Process {
	var ps []Process
	port := o.port
	configDB := "" // the config server set's connection string, for the routers' --configdb
	add := func(name, role, set, bin string, dataBearing bool) {
		if o.ports != nil && len(ps) < len(o.ports) {
			port = o.ports[len(ps)]
		}
		p := Process{Name: name, Role: role, ReplSet: set, Host: o.bindIP, Port: port, Binary: bin,
			LogPath: filepath.Join(dir, name, bin+".log")}
		if dataBearing {
			p.DBPath = filepath.Join(dir, name, "db")
		}
		p.Args = []string{"--port", strconv.Itoa(p.Port), "--bind_ip", o.bindIP, "--logpath", p.LogPath}
		if bin == "humongos" {
			// humongos has no --logpath yet: its log is its standard output, which
			// startProcess keeps in <name>/humongos.out.
			p.LogPath = filepath.Join(dir, name, bin+".out")
			p.Args = p.Args[:4]
		}
		if dataBearing {
			p.Args = append(p.Args, "--dbpath", p.DBPath)
		}
		if set != "" {
			p.Args = append(p.Args, "--replSet", set)
		}
		switch role {
		case "config":
			p.Args = append(p.Args, "--configsvr")
		case "shard":
			p.Args = append(p.Args, "--shardsvr")
		case "router":
			p.Args = append(p.Args, "--configdb", configDB)
		}
		if o.auth {
			p.KeyFile = keyfilePath(dir)
			p.Args = append(p.Args, "--keyFile", p.KeyFile)
		}
		if o.tls {
			f := tlsFiles(dir)
			p.Args = append(p.Args, tlsArgs(f)...)
			p.TLSCAFile = f.CA
		}
		if bin == "humongod" {
			if (role == "shard" || role == "config") && !setsParameter(o.extra, "periodicNoopIntervalSecs") {
				// An idle shard's no-op every second moves its change streams' resume point,
				// so a stream through the router, which holds an event until every shard has
				// passed it, returns events within about a second (MongoDB's default, 10 s,
				// is made for production clusters; a flag after "--" overrides this one).
				p.Args = append(p.Args, "--setParameter", "periodicNoopIntervalSecs=1")
			}
			p.Args = append(p.Args, o.extra...)
		} else {
			p.Args = append(p.Args, routerArgs(o.extra)...)
		}
		ps = append(ps, p)
		port++
	}
	switch o.topology() {
	case "standalone":
		add("standalone", "standalone", "", "humongod", true)
	case "replset":
		set := o.name + "0"
		for m := 0; m < o.replset; m++ {
			add(fmt.Sprintf("%s-%d", set, m), "member", set, "humongod", true)
		}
	case "sharded":
		members := max(o.replset, 1)
		for s := 0; s < o.shards; s++ {
			set := o.name + strconv.Itoa(s)
			for m := 0; m < members; m++ {
				add(fmt.Sprintf("%s-%d", set, m), "shard", set, "humongod", true)
			}
		}
		var hosts []string
		for c := 0; c < o.configs; c++ {
			add(fmt.Sprintf("%s-%d", configSetName, c), "config", configSetName, "humongod", true)
			hosts = append(hosts, memberHost(&ps[len(ps)-1]))
		}
		configDB = configSetName + "/" + strings.Join(hosts, ",")
		for r := 0; r < o.routers; r++ {
			add(fmt.Sprintf("router-%d", r), "router", "", "humongos", false)
		}
	}
	return ps
}

// routerArgs are the --setParameter flags among the humongod flags extra that name a
// parameter the router registers, for every humongos. Like mongos, humongos refuses an
// unknown parameter at startup, and most of humongod's (storage, replication) mean nothing
// to a router; filtering here (as mlaunch passes mongos only the options mongos accepts)
// keeps one command line for the whole cluster, where a separate router flag would make
// every shared parameter (enableTestCommands, logLevel) be spelled twice. A misspelt
// parameter still stops the humongods.
func routerArgs(extra []string) []string {
	known := map[string]bool{}
	for _, s := range router.ParamSpecs() {
		if s.Startup {
			known[s.Name] = true
		}
	}
	var out []string
	for i := 0; i < len(extra); i++ {
		name, val, ok := strings.Cut(strings.TrimLeft(extra[i], "-"), "=")
		if !strings.HasPrefix(extra[i], "-") || name != "setParameter" {
			continue
		}
		if !ok {
			if i+1 >= len(extra) {
				break
			}
			i++
			val = extra[i]
		}
		if k, _, _ := strings.Cut(val, "="); known[k] {
			out = append(out, "--setParameter", val)
		}
	}
	return out
}

// setsParameter reports whether the humongod flags extra set the server parameter name.
func setsParameter(extra []string, name string) bool {
	for i := 0; i < len(extra); i++ {
		flag, val, ok := strings.Cut(strings.TrimLeft(extra[i], "-"), "=")
		if !strings.HasPrefix(extra[i], "-") || flag != "setParameter" {
			continue
		}
		if !ok && i+1 < len(extra) {
			i++
			val = extra[i]
		}
		if k, _, _ := strings.Cut(val, "="); k == name {
			return true
		}
	}
	return false
}

// configSetName is the config server replica set's name in a sharded deployment.
const configSetName = "configRS"

// portFree reports whether port can be listened on at every address of bindIP (a
// comma-separated list, as humongod's --bind_ip). Another program may still take it between
// this check and the process's own bind; startProcess reports that case as errPortInUse.
func portFree(bindIP string, port int) error {
	for _, ip := range strings.Split(bindIP, ",") {
		l, err := net.Listen("tcp", net.JoinHostPort(strings.TrimSpace(ip), strconv.Itoa(port)))
		if err != nil {
			return err
		}
		_ = l.Close()
	}
	return nil
}

// errPortInUse marks a process that exited at startup because its port was taken (after
// portFree's check): the caller may retry on other ports.
var errPortInUse = errors.New("port already in use")

// findBinary locates a binary: in --bin-dir if given, else next to the running humongo
// executable, else on $PATH.
func findBinary(name, binDir string) (string, error) {
	if binDir != "" {
		p := filepath.Join(binDir, name)
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s not found in --bin-dir %s", name, binDir)
		}
		return filepath.Abs(p)
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found next to humongo nor on $PATH (build it with `go build ./cmd/%s` or pass --bin-dir)", name, name)
	}
	return filepath.Abs(p)
}

func cmdUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseUpFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if old, err := readState(dir); err == nil {
		for i := range old.Processes {
			if p := &old.Processes[i]; processRunning(p) {
				return fmt.Errorf("a deployment is already running in %s (%s, pid %d, port %d); stop it with `humongo down --dir %s`",
					dir, p.Name, p.Pid, p.Port, o.dir)
			}
		}
	} else if !errors.Is(err, errNoState) {
		return err
	}
	procs := plan(o, dir)
	// Every port is checked before anything starts, so a taken one fails `up` at once with its
	// number instead of leaving the first members started and the next one dead at bind.
	for _, p := range procs {
		if err := portFree(o.bindIP, p.Port); err != nil {
			return fmt.Errorf("port %d (for %s) is in use: %w; choose other ports with --port or --ports", p.Port, p.Name, err)
		}
	}
	bins := map[string]string{}
	for _, p := range procs {
		if bins[p.Binary] == "" {
			if bins[p.Binary], err = findBinary(p.Binary, o.binDir); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if o.auth {
		if _, err := ensureKeyfile(dir); err != nil {
			return fmt.Errorf("making the keyfile: %w", err)
		}
	}
	if o.tls {
		f, err := certs.EnsureLocal(tlsDir(dir), certificateHosts(o.bindIP))
		if err != nil {
			return fmt.Errorf("making the TLS certificates: %w", err)
		}
		fmt.Fprintf(stdout, "TLS: CA file %s, server certificate %s, client certificate %s\n", f.CA, f.Server, f.Client)
	}
	st := &State{Version: stateVersion, Topology: o.topology(), Dir: dir, Processes: []Process{}}
	prog := newProgress(stdout, len(procs))
	for _, p := range procs {
		prog.begin(fmt.Sprintf("starting %s %s on %s", p.Binary, p.Name, p.addr()))
		start := time.Now()
		p.Binary = bins[p.Binary]
		pid, err := startProcess(ctx, &p, o.timeout)
		if pid > 0 {
			p.Pid = pid
			st.Processes = append(st.Processes, p)
			// Recorded before readiness is known, so `down` can stop whatever did start.
			if werr := writeState(st); werr != nil && err == nil {
				err = werr
			}
		}
		if err != nil {
			prog.end("failed")
			stopAll(st, stdout, 10*time.Second)
			_ = writeState(st)
			return err
		}
		prog.end(fmt.Sprintf("ready (%.1fs)", time.Since(start).Seconds()))
	}
	prog.finish()
	uri := "mongodb://" + procs[0].addr() + "/"
	if q := tlsQuery(procs[0].TLSCAFile); q != "" {
		uri += "?" + q
	}
	switch st.Topology {
	case "replset":
		uri, err = initiateReplicaSet(ctx, procs, stdout, o.timeout)
	case "sharded":
		uri, err = startSharded(ctx, procs, stdout, o.timeout)
	}
	if err == nil && o.auth {
		var pw string
		if pw, err = createAdmins(ctx, dir, procs); err == nil {
			uri = withCredentials(uri, pw)
			fmt.Fprintf(stdout, "authorization on: keyfile %s, user %s (root) with the password in %s\n",
				keyfilePath(dir), adminUser, credentialsPath(dir))
		}
	}
	if err != nil {
		stopAll(st, stdout, 10*time.Second)
		_ = writeState(st)
		return err
	}
	fmt.Fprintf(stdout, "%s deployment is up: %s\nstate file %s; stop it with `humongo down --dir %s`\n",
		st.Topology, uri, statePath(dir), o.dir)
	return nil
}

// startProcess starts one process detached from humongo — a session and process group of its
// own (setsid), so neither the terminal's Ctrl-C nor its hangup reaches it, and stdin closed —
// and waits until it
// answers hello. Its stdout and stderr go to a file next to its log: they hold what it prints
// before its log is open (a bad flag, say). On failure the process is killed; the pid is
// returned whenever a process was started.
func startProcess(ctx context.Context, p *Process, timeout time.Duration) (int, error) {
	if err := os.MkdirAll(filepath.Dir(p.LogPath), 0o755); err != nil {
		return 0, err
	}
	outPath := filepath.Join(filepath.Dir(p.LogPath), filepath.Base(p.Binary)+".out")
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = filepath.Dir(p.LogPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", p.Binary, err)
	}
	pid := cmd.Process.Pid
	if err := waitReady(ctx, p, pid, timeout); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// Killed and reaped: nothing left for the state file to record.
		logs := tailLogs(outPath, p.LogPath)
		if strings.Contains(logs, "address already in use") {
			err = fmt.Errorf("%w (port %d): %w", errPortInUse, p.Port, err)
		}
		return 0, fmt.Errorf("%s (pid %d) did not become ready: %w\n%s", p.Name, pid, err, logs)
	}
	// From here the process is on its own; humongo exiting leaves it to init to reap.
	_ = cmd.Process.Release()
	return pid, nil
}

// waitReady waits until the process accepts TCP connections and answers hello. There is no
// event to wait on for "listening", so it probes every 20 ms; between probes it checks, without
// blocking, whether the child has already exited (a bad flag, a port in use), to fail at once.
func waitReady(ctx context.Context, p *Process, pid int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var ws syscall.WaitStatus
		if wpid, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); wpid == pid {
			return fmt.Errorf("exited during startup with status %d", ws.ExitStatus())
		}
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.DialContext(ctx, "tcp", p.addr()); err == nil {
			_ = c.Close()
			_, err := hello(ctx, p)
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// tailLogs returns the last lines of the process's output and log files, for error messages.
func tailLogs(paths ...string) string {
	var b strings.Builder
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-10):]
		fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", path, strings.Join(lines, "\n"))
	}
	return b.String()
}
