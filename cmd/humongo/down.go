package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func cmdDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("down", stderr)
	dir := fs.String("dir", "./humongo-local", "directory of the deployment")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for each process to exit after SIGTERM before SIGKILL")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	st, err := readState(abs)
	if err != nil {
		return err
	}
	stopAll(st, stdout, *timeout)
	return writeState(st)
}

// stopAll stops every process of st and clears their pids: routers first, then shards and
// other data nodes, config servers last (a shard shutting down still talks to its config
// servers), each group in the reverse of start order. Each gets SIGTERM — humongod shuts
// down cleanly on it — and, if still running after timeout, SIGKILL.
func stopAll(st *State, out io.Writer, timeout time.Duration) {
	rank := func(p *Process) int {
		switch p.Role {
		case "router":
			return 0
		case "config":
			return 2
		}
		return 1
	}
	var order []*Process
	for r := 0; r <= 2; r++ {
		for i := len(st.Processes) - 1; i >= 0; i-- {
			if rank(&st.Processes[i]) == r {
				order = append(order, &st.Processes[i])
			}
		}
	}
	for _, p := range order {
		if p.Pid == 0 {
			continue
		}
		if !processRunning(p) {
			fmt.Fprintf(out, "%s (pid %d) was not running\n", p.Name, p.Pid)
			p.Pid = 0
			continue
		}
		fmt.Fprintf(out, "stopping %s (pid %d, port %d) ... ", p.Name, p.Pid, p.Port)
		start := time.Now()
		_ = syscall.Kill(p.Pid, syscall.SIGTERM)
		how := "stopped"
		if !waitExit(p, timeout) {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
			how = fmt.Sprintf("killed with SIGKILL after %s", timeout)
			if !waitExit(p, 10*time.Second) {
				fmt.Fprintf(out, "still running after SIGKILL\n")
				continue // keep the pid: status will show it and down can be retried
			}
		}
		fmt.Fprintf(out, "%s (%.1fs)\n", how, time.Since(start).Seconds())
		p.Pid = 0
	}
}

// helloReply is the part of a hello reply status reports.
type helloReply struct {
	IsWritablePrimary bool   `bson:"isWritablePrimary" json:"isWritablePrimary"`
	Secondary         bool   `bson:"secondary" json:"secondary"`
	ArbiterOnly       bool   `bson:"arbiterOnly" json:"arbiterOnly,omitempty"`
	SetName           string `bson:"setName" json:"setName,omitempty"`
	Msg               string `bson:"msg" json:"msg,omitempty"`
	MaxWireVersion    int32  `bson:"maxWireVersion" json:"maxWireVersion"`
	// StateStr is the member's own state from replSetGetStatus (PRIMARY, SECONDARY,
	// STARTUP2, RECOVERING, ...), for replica-set members only.
	StateStr string `bson:"-" json:"stateStr,omitempty"`
}

// role names the node's role as hello reports it.
func (h *helloReply) role() string {
	switch {
	case h.Msg == "isdbgrid":
		return "router"
	case h.ArbiterOnly:
		return "arbiter"
	case h.SetName != "" && h.IsWritablePrimary:
		return "primary"
	case h.SetName != "" && h.Secondary:
		return "secondary"
	case h.SetName != "":
		return "other"
	case h.IsWritablePrimary:
		return "standalone"
	}
	return "unknown"
}

// hello runs the hello command on one node through the Go driver with directConnection, the
// way a client would see it.
func hello(ctx context.Context, p *Process) (*helloReply, error) {
	client, err := connectProcess(p, options.Client().
		SetAppName("humongo").
		SetServerSelectionTimeout(5*time.Second).
		SetConnectTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	var h helloReply
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h); err != nil {
		return nil, err
	}
	if h.SetName != "" {
		// hello has no state name for members that are neither primary nor secondary
		// (STARTUP2, RECOVERING, ROLLBACK); replSetGetStatus does. A failure leaves it empty:
		// hello alone still says what the node is.
		var st struct {
			Members []struct {
				StateStr string `bson:"stateStr"`
				Self     bool   `bson:"self"`
			} `bson:"members"`
		}
		if client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st) == nil {
			for _, m := range st.Members {
				if m.Self {
					h.StateStr = m.StateStr
				}
			}
		}
	}
	return &h, nil
}

// procStatus is one row of `humongo status`.
type procStatus struct {
	Name    string      `json:"name"`
	Role    string      `json:"role"`
	ReplSet string      `json:"replSet,omitempty"`
	Host    string      `json:"host"`
	Port    int         `json:"port"`
	Pid     int         `json:"pid"`
	State   string      `json:"state"` // running | stopped | unreachable
	Hello   *helloReply `json:"hello,omitempty"`
	// HelloRole is the role the node reports (standalone, primary, secondary, router...).
	HelloRole string `json:"helloRole,omitempty"`
	Error     string `json:"error,omitempty"`
	DBPath    string `json:"dbpath,omitempty"`
	LogPath   string `json:"logpath"`
}

// statusReport is `humongo status --json`.
type statusReport struct {
	Dir      string `json:"dir"`
	Topology string `json:"topology"`
	// URI is the replica-set connection string of a replset deployment, the routers' of a
	// sharded one.
	URI       string       `json:"uri,omitempty"`
	Processes []procStatus `json:"processes"`
	// Sharding is a sharded deployment's shards and chunks per shard (status_sharding.go).
	Sharding *shardingStatus `json:"sharding,omitempty"`
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	dir := fs.String("dir", "./humongo-local", "directory of the deployment")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for each node's hello")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	st, err := readState(abs)
	if err != nil {
		return err
	}
	rep := statusReport{Dir: st.Dir, Topology: st.Topology, Processes: make([]procStatus, len(st.Processes))}
	switch {
	case st.Topology == "replset" && len(st.Processes) > 0:
		rep.URI = replicaSetURI(st.Processes)
	case st.Topology == "sharded":
		rep.URI = routerURI(st.Processes)
	}
	var wg sync.WaitGroup
	for i := range st.Processes {
		wg.Add(1)
		go func() { // one hello per node at once: status takes one timeout, not one per node
			defer wg.Done()
			rep.Processes[i] = probe(ctx, &st.Processes[i], *timeout)
		}()
	}
	wg.Wait()
	if st.Topology == "sharded" {
		rep.Sharding = readShardingStatus(ctx, rep.URI, st.Processes[0].KeyFile, *timeout)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s deployment in %s\n", rep.Topology, rep.Dir)
	if rep.URI != "" {
		fmt.Fprintf(stdout, "connection string: %s\n", rep.URI)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tPORT\tPID\tSTATE\tHELLO\tREPLSET")
	for _, p := range rep.Processes {
		pid, h, rs := "-", p.HelloRole, "-"
		if p.Pid > 0 {
			pid = fmt.Sprint(p.Pid)
		}
		if h == "" {
			h = "-"
		}
		if p.ReplSet != "" {
			rs = p.ReplSet
			if p.Hello != nil && p.Hello.StateStr != "" {
				rs += "/" + p.Hello.StateStr
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", p.Name, roleLabel(p.Role), p.Port, pid, p.State, h, rs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Sharding != nil {
		return printShardingStatus(stdout, rep.Sharding)
	}
	return nil
}

// probe finds one process's state: stopped if its pid is gone, running if it answers hello,
// unreachable if it is alive but does not answer (paused, starting, wedged).
func probe(ctx context.Context, p *Process, timeout time.Duration) procStatus {
	s := procStatus{Name: p.Name, Role: p.Role, ReplSet: p.ReplSet, Host: p.Host, Port: p.Port, Pid: p.Pid,
		DBPath: p.DBPath, LogPath: p.LogPath, State: "stopped"}
	if !processRunning(p) {
		s.Pid = 0
		return s
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := hello(hctx, p)
	if err != nil {
		s.State, s.Error = "unreachable", err.Error()
		return s
	}
	s.State, s.Hello, s.HelloRole = "running", h, h.role()
	return s
}
