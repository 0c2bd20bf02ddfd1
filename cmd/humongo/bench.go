package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"humongo/internal/bench"
)

// benchOptions are `humongo bench`'s flags beyond bench.Config.
type benchOptions struct {
	cfg          bench.Config
	uri          string
	db, coll     string
	writeConcern string
	journal      bool
	readConcern  string
	json         bool
	timeout      time.Duration
}

func parseBenchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	o := &benchOptions{cfg: bench.Defaults()}
	o.cfg.Workload = ""
	c := &o.cfg
	fs := newFlagSet("bench", stderr)
	fs.StringVar(&c.Workload, "workload", "", "workload: "+strings.Join(bench.WorkloadNames(), ", ")+" (required; also the first argument)")
	fs.StringVar(&o.uri, "uri", "mongodb://127.0.0.1:27017", "connection string of the server to benchmark")
	fs.Int64Var(&c.Records, "records", c.Records, "records to load, and assumed loaded by a workload")
	fs.Int64Var(&c.Ops, "ops", c.Ops, "operations to run")
	fs.IntVar(&c.Threads, "threads", c.Threads, "concurrent clients")
	fs.IntVar(&c.FieldCount, "field-count", c.FieldCount, "fields per record")
	fs.IntVar(&c.FieldLength, "field-length", c.FieldLength, "bytes per field")
	fs.StringVar(&c.Distribution, "distribution", "", "key distribution: zipfian, uniform or latest (default: the workload's, as YCSB: latest for d, zipfian otherwise)")
	fs.IntVar(&c.MaxScanLength, "max-scan-length", c.MaxScanLength, "workload e: scans read 1..N records")
	fs.BoolVar(&c.Drop, "drop", false, "drop the collection and load the records before the workload")
	fs.DurationVar(&c.Duration, "duration", 0, "cap on each phase's run time (0: none)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed")
	fs.StringVar(&o.db, "db", "ycsb", "database")
	fs.StringVar(&o.coll, "collection", "usertable", "collection")
	fs.StringVar(&o.writeConcern, "write-concern", "", "write concern w: majority, a number or a tag set (default: the server's)")
	fs.BoolVar(&o.journal, "journal", false, "write concern j:true")
	fs.StringVar(&o.readConcern, "read-concern", "", "read concern level: local, majority, available, linearizable, snapshot")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for the server to answer at start")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: humongo bench [--workload] a|b|c|d|e|f|load|ping [flags]\n")
		fs.PrintDefaults()
	}
	// The workload may come first, as a positional argument, before the flags.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		c.Workload, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q", fs.Args())
	}
	if c.Workload == "" {
		return nil, usagef("--workload is required (%s)", strings.Join(bench.WorkloadNames(), ", "))
	}
	w, err := bench.LookupWorkload(c.Workload)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	c.Workload = w.Name
	if err := c.Validate(); err != nil {
		return nil, usageError{err.Error()}
	}
	if _, err := bench.ParseWriteConcern(o.writeConcern, o.journal); err != nil {
		return nil, usageError{err.Error()}
	}
	if _, err := bench.ParseReadConcern(o.readConcern); err != nil {
		return nil, usageError{err.Error()}
	}
	return o, nil
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	wc, _ := bench.ParseWriteConcern(o.writeConcern, o.journal)
	rc, _ := bench.ParseReadConcern(o.readConcern)
	store, err := bench.NewMongoStore(ctx, o.uri, bench.MongoOptions{
		Database: o.db, Collection: o.coll, WriteConcern: wc, ReadConcern: rc, PoolSize: o.cfg.Threads,
	}, o.timeout)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(context.WithoutCancel(ctx)) }()

	res, err := bench.Run(ctx, store, o.cfg)
	if err != nil && res == nil {
		return err
	}
	labels := map[string]string{}
	if o.writeConcern != "" || o.journal {
		labels["writeConcern"] = fmt.Sprintf("w=%s j=%v", o.writeConcern, o.journal)
	}
	if o.readConcern != "" {
		labels["readConcern"] = o.readConcern
	}
	labels["namespace"] = o.db + "." + o.coll
	rep := res.Report(bench.RedactURI(o.uri), labels)
	if o.json {
		if werr := rep.WriteJSON(stdout); werr != nil {
			return werr
		}
	} else if werr := rep.WriteTable(stdout); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if res.Interrupted {
		fmt.Fprintln(stderr, "humongo bench: interrupted; the results above are partial")
		return interruptedError{}
	}
	for _, p := range res.Phases {
		if n := p.Total(); n > 0 && p.Errors() == n {
			return fmt.Errorf("every operation of phase %s failed (see the first error above)", p.Phase)
		}
	}
	return nil
}
