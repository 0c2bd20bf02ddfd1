package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// codeAlreadyInitialized is MongoDB's AlreadyInitialized (replSetInitiate on a member that has
// a config). humongo talks to servers only through the driver, so it names the one code it
// acts on here rather than importing the server's error package.
const codeAlreadyInitialized = 23

// memberHost is the name a member calls itself in the replica-set config, which replSetInitiate
// must use: humongod advertises its first bind address, or the machine's hostname when that
// is a wildcard (cmd/humongod advertisedHost).
func memberHost(p *Process) string {
	host := p.Host
	if host == "0.0.0.0" || host == "::" || host == "" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return host + ":" + strconv.Itoa(p.Port)
}

// replicaSetURI is the connection string of the replica set procs form.
func replicaSetURI(procs []Process) string {
	hosts := make([]string, len(procs))
	for i := range procs {
		hosts[i] = memberHost(&procs[i])
	}
	uri := "mongodb://" + strings.Join(hosts, ",") + "/?replicaSet=" + procs[0].ReplSet
	if q := tlsQuery(procs[0].TLSCAFile); q != "" {
		uri += "&" + q
	}
	return uri
}

// initiateReplicaSet runs replSetInitiate on the first member with every member at default
// priority and votes (MongoDB's defaults for everything else), waits until one member is a
// writable primary, and returns the replica-set connection string.
func initiateReplicaSet(ctx context.Context, procs []Process, out io.Writer, timeout time.Duration) (string, error) {
	set := procs[0].ReplSet
	members := make(bson.A, len(procs))
	for i := range procs {
		members[i] = bson.D{{Key: "_id", Value: i}, {Key: "host", Value: memberHost(&procs[i])}}
	}
	uri := replicaSetURI(procs)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	fmt.Fprintf(out, "initiating replica set %s ... ", set)
	start := time.Now()
	client, err := connectProcess(&procs[0], options.Client().
		SetAppName("humongo").SetServerSelectionTimeout(5*time.Second).SetConnectTimeout(5*time.Second))
	if err != nil {
		fmt.Fprintln(out, "failed")
		return "", err
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	cfg := bson.D{{Key: "_id", Value: set}, {Key: "members", Value: members}}
	if procs[0].Role == "config" {
		cfg = append(cfg, bson.E{Key: "configsvr", Value: true})
	}
	err = client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err()
	var ce mongo.CommandError
	switch {
	case err == nil:
		fmt.Fprintf(out, "ok (%.1fs)\n", time.Since(start).Seconds())
	case errors.As(err, &ce) && ce.Code == codeAlreadyInitialized:
		// `up` again on the directory of a stopped set: the members kept their config.
		fmt.Fprintln(out, "already initiated")
	default:
		fmt.Fprintln(out, "failed")
		return "", fmt.Errorf("replSetInitiate on %s: %w", procs[0].Name, err)
	}
	fmt.Fprint(out, "waiting for a primary ... ")
	start = time.Now()
	// Left alone, the set elects a primary once electionTimeoutMillis (10 s) passes; asking
	// the initiating member to stand at once (replSetStepUp) makes `up` take a second
	// instead. Its votes come only once the others have the config by heartbeat, so a failed
	// attempt is retried a few times and then left to the election timeout.
	for attempt := 0; attempt < 5; attempt++ {
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		err := client.Database("admin").RunCommand(sctx, bson.D{{Key: "replSetStepUp", Value: 1}}).Err()
		scancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	primary, err := waitForPrimary(ctx, procs)
	if err != nil {
		fmt.Fprintln(out, "failed")
		return "", err
	}
	fmt.Fprintf(out, "%s (%.1fs)\n", primary.Name, time.Since(start).Seconds())
	return uri, nil
}

// waitForPrimary asks every member's hello until one says it is a writable primary. An
// election has no event humongo could wait on from outside, so it asks every 100 ms.
func waitForPrimary(ctx context.Context, procs []Process) (*Process, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for i := range procs {
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			h, err := hello(hctx, &procs[i])
			cancel()
			if err != nil {
				last = err
				continue
			}
			if h.IsWritablePrimary {
				return &procs[i], nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("no member became primary")
			}
			return nil, fmt.Errorf("waiting for a primary: %w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}
