package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// startSharded finishes `up --shards`: with every process running, it initiates the config
// server replica set (configsvr: true) and the shards' sets, then adds each shard through
// the first router, and returns the routers' connection string.
func startSharded(ctx context.Context, procs []Process, out io.Writer, timeout time.Duration) (string, error) {
	var order []string // config set first: its catalog initialises while the shards elect
	sets := map[string][]Process{}
	for _, p := range procs {
		if p.ReplSet == "" {
			continue
		}
		if sets[p.ReplSet] == nil {
			if p.Role == "config" {
				order = append([]string{p.ReplSet}, order...)
			} else {
				order = append(order, p.ReplSet)
			}
		}
		sets[p.ReplSet] = append(sets[p.ReplSet], p)
	}
	// The sets are initiated at once (each waits for its own primary, seconds with several
	// members); each one's progress is printed when all are done, in order.
	bufs := make([]bytes.Buffer, len(order))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, set := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = initiateReplicaSet(ctx, sets[set], &bufs[i], timeout)
		}()
	}
	wg.Wait()
	for i := range bufs {
		_, _ = out.Write(bufs[i].Bytes())
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	var router *Process
	for i := range procs {
		if procs[i].Role == "router" {
			router = &procs[i]
			break
		}
	}
	if router == nil {
		return "", errors.New("a sharded cluster needs a router")
	}
	cl, err := connectProcess(router, options.Client().
		SetAppName("humongo").SetServerSelectionTimeout(5*time.Second).SetConnectTimeout(5*time.Second))
	if err != nil {
		return "", err
	}
	defer func() { _ = cl.Disconnect(context.WithoutCancel(ctx)) }()
	for _, set := range order {
		members := sets[set]
		if members[0].Role != "shard" {
			continue
		}
		hosts := make([]string, len(members))
		for i := range members {
			hosts[i] = memberHost(&members[i])
		}
		if err := addShard(ctx, cl, set+"/"+strings.Join(hosts, ","), out, timeout); err != nil {
			return "", err
		}
	}
	return routerURI(procs), nil
}

// addShard runs addShard through the router. The config server initialises its catalog
// just after it becomes primary, and until then answers NotYetInitialized; that, and a
// router still connecting, is retried every 100 ms until timeout.
func addShard(ctx context.Context, cl *mongo.Client, connString string, out io.Writer, timeout time.Duration) error {
	fmt.Fprintf(out, "adding shard %s ... ", connString)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var reply struct {
			ShardAdded string `bson:"shardAdded"`
		}
		err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "addShard", Value: connString}}).Decode(&reply)
		if err == nil {
			fmt.Fprintf(out, "%s (%.1fs)\n", reply.ShardAdded, time.Since(start).Seconds())
			return nil
		}
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Code != codeNotYetInitialized {
			fmt.Fprintln(out, "failed")
			return fmt.Errorf("addShard %s: %w", connString, err)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "failed")
			return fmt.Errorf("addShard %s: %w (last: %v)", connString, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// codeNotYetInitialized is MongoDB's NotYetInitialized: the config server's catalog is not
// there yet.
const codeNotYetInitialized = 94

// routerURI is the connection string of a sharded deployment: every router.
func routerURI(procs []Process) string {
	var hosts []string
	ca := ""
	for i := range procs {
		if procs[i].Role == "router" {
			hosts = append(hosts, memberHost(&procs[i]))
			ca = procs[i].TLSCAFile
		}
	}
	uri := "mongodb://" + strings.Join(hosts, ",") + "/"
	if q := tlsQuery(ca); q != "" {
		uri += "?" + q
	}
	return uri
}

// roleLabel is how `status` names a process's role.
func roleLabel(role string) string {
	switch role {
	case "config":
		return "config server"
	case "shard":
		return "shard"
	}
	return role
}
