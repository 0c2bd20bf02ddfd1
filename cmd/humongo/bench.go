package main

import (
	"context"
	"encoding/json"
	"errors"
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
	progress     time.Duration
	shardKey     string
	moveChunks   time.Duration
	streams      int     // --change-streams
	rate         float64 // --rate
}

func parseBenchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	o := &benchOptions{cfg: bench.Defaults()}
	o.cfg.Workload = ""
	c := &o.cfg
	fs := newFlagSet("bench", stderr)
	fs.StringVar(&c.Workload, "workload", "", "workload: "+strings.Join(bench.WorkloadNames(), ", ")+" (required; also the first argument)")
	fs.StringVar(&o.uri, "uri", "mongodb://127.0.0.1:27017", "connection string of the server to benchmark")
	fs.Int64Var(&c.Records, "records", c.Records, "records to load; a workload loads them first if the collection holds fewer")
	fs.Int64Var(&c.Ops, "ops", c.Ops, "operations to run")
	fs.IntVar(&c.Threads, "threads", c.Threads, "concurrent clients")
	fs.IntVar(&c.FieldCount, "field-count", c.FieldCount, "fields per record")
	fs.IntVar(&c.FieldLength, "field-length", c.FieldLength, "bytes per field")
	fs.StringVar(&c.Distribution, "distribution", "", "key distribution: zipfian, uniform or latest (default: the workload's, as YCSB: latest for d, zipfian otherwise)")
	fs.IntVar(&c.MaxScanLength, "max-scan-length", c.MaxScanLength, "workloads e and scan: scans read 1..N records (N with --scan-length-distribution constant)")
	fs.StringVar(&c.ScanLengthDistribution, "scan-length-distribution", "", "scan lengths: uniform in 1..max-scan-length (default) or constant (always max-scan-length)")
	fs.StringVar(&o.shardKey, "shard-key", "", "through a router only: shard the collection on {_id: \"hashed\"} (hashed) or {_id: 1} (range) first, and again after --drop")
	fs.DurationVar(&o.moveChunks, "move-chunks", 0, "through a router only: while the workload runs, move a chunk of the sharded collection to another shard every DURATION (0: off); load the records first")
	fs.BoolVar(&c.CrossShard, "cross-shard", false, "workload txn through a router, collection sharded with --shard-key range: put the records on two shards (split at the median record and move the upper chunk, if one shard holds them all) and alternate transfers within one shard (TXN) and across two (TXN-CROSS-SHARD)")
	fs.IntVar(&o.streams, "change-streams", 0, "open N change streams on the collection while the workload runs and report the first's event latency (write acknowledged to event delivered) and the events delivered")
	fs.Float64Var(&o.rate, "rate", 0, "pace the workload at this many operations per second in all (0: as fast as the threads go)")
	fs.BoolVar(&c.Drop, "drop", false, "drop the collection and load the records before the workload")
	fs.DurationVar(&c.Duration, "duration", 0, "cap on the workload's run time (0: none); a load before it (--drop, or automatic) always completes")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed")
	fs.StringVar(&o.db, "db", "ycsb", "database")
	fs.StringVar(&o.coll, "collection", "usertable", "collection")
	fs.StringVar(&o.writeConcern, "write-concern", "", "write concern w: majority, a number or a tag set (default: the server's; workload txn commits with majority)")
	fs.BoolVar(&o.journal, "journal", false, "write concern j:true")
	fs.StringVar(&o.readConcern, "read-concern", "", "read concern level: local, majority, available, linearizable, snapshot")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for the server to answer at start")
	fs.DurationVar(&o.progress, "progress", 5*time.Second, "interval between progress lines on stderr (0: none; none with --json)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: humongo bench [--workload] %s [flags]\n", strings.Join(bench.WorkloadNames(), "|"))
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
	if o.progress < 0 {
		return nil, usagef("--progress must not be negative, got %s", o.progress)
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
	if o.moveChunks < 0 {
		return nil, usagef("--move-chunks must not be negative, got %s", o.moveChunks)
	}
	if c.CrossShard && o.moveChunks > 0 {
		return nil, usagef("--cross-shard places the records on shards before the workload: chunks must not move during it (--move-chunks)")
	}
	if c.CrossShard && o.shardKey == bench.ShardKeyHashed {
		return nil, usagef("--cross-shard places records by _id ranges: use --shard-key range")
	}
	if o.moveChunks > 0 && (c.Drop || w.Name == "load" || w.Name == "ping") {
		return nil, usagef("--move-chunks measures a workload while chunks move: load the records first (without --move-chunks), then run the workload without --drop")
	}
	if o.shardKey != "" {
		if _, err := bench.ShardKeyPattern(o.shardKey); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	if o.streams < 0 || o.rate < 0 {
		return nil, usagef("--change-streams and --rate must not be negative")
	}
	if o.streams > 0 && c.CrossShard {
		return nil, usagef("--change-streams does not combine with --cross-shard")
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
		ShardKey: o.shardKey,
	}, o.timeout)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close(context.WithoutCancel(ctx)) }()
	// With --drop, the store's Drop shards the new collection; ping touches no collection.
	if o.shardKey != "" && !o.cfg.Drop && o.cfg.Workload != "ping" {
		sctx, cancel := context.WithTimeout(ctx, o.timeout)
		err := store.Shard(sctx)
		cancel()
		if err != nil {
			return err
		}
	}

	var mover *chunkMover
	if o.moveChunks > 0 {
		if mover, err = newChunkMover(ctx, o.uri, o.db+"."+o.coll, o.moveChunks, o.timeout); err != nil {
			return err
		}
	}

	o.cfg.Notice = func(msg string) { fmt.Fprintf(stderr, "humongo bench: %s\n", msg) }
	if !o.json && o.progress > 0 {
		o.cfg.Progress = func(p bench.Progress) { fmt.Fprintln(stderr, progressLine(p)) }
		o.cfg.ProgressInterval = o.progress
	}
	stopMover := func() {}
	if mover != nil {
		stopMover = mover.start(ctx)
	}
	var runStore bench.Store = store
	var watch *streamWatch
	if o.streams > 0 || o.rate > 0 {
		if o.streams > 0 {
			if o.cfg.Drop {
				// Dropped now, before the streams open: a drop during the run would end them.
				if err := store.Drop(ctx); err != nil {
					return err
				}
				o.cfg.Drop = false
			}
			if watch, err = newStreamWatch(ctx, o.uri, o.db, o.coll, o.streams, o.timeout); err != nil {
				return err
			}
			if err := watch.start(ctx); err != nil {
				return err
			}
		}
		runStore = &watchedStore{Store: store, watch: watch, rate: o.rate, start: time.Now()}
	}
	res, err := bench.Run(ctx, runStore, o.cfg)
	if watch != nil {
		watch.stop()
	}
	stopMover()
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
	if o.shardKey != "" {
		labels["shardKey"] = o.shardKey
	}
	if o.cfg.CrossShard {
		labels["crossShard"] = "true"
	}
	rep := res.Report(bench.RedactURI(o.uri), labels)
	var moves *moveReport
	if mover != nil {
		moves = mover.report()
	}
	if o.json {
		// The moves section joins the report's own fields at the top level.
		out := struct {
			*bench.ReportJSON
			Moves *moveReport `json:"moves,omitempty"`
		}{rep, moves}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if werr := enc.Encode(out); werr != nil {
			return werr
		}
	} else {
		if werr := rep.WriteTable(stdout); werr != nil {
			return werr
		}
		if watch != nil {
			watch.writeReport(stdout)
		}
		if moves != nil {
			if werr := moves.writeTable(stdout); werr != nil {
				return werr
			}
		}
	}
	if err != nil {
		return err
	}
	if res.Interrupted {
		fmt.Fprintln(stderr, "humongo bench: interrupted; the results above are partial")
		return interruptedError{}
	}
	// Failed operations make the measurement wrong (a failed read is faster than a real one):
	// they are listed in the report and fail the command.
	var failed []string
	for _, p := range res.Phases {
		if n, e := p.Total(), p.Errors(); e > 0 {
			first := ""
			for _, s := range p.Ops {
				if s != nil && s.FirstError != "" {
					first = fmt.Sprintf("; first %s error: %s", s.Type, s.FirstError)
					break
				}
			}
			failed = append(failed, fmt.Sprintf("phase %s: %d of %d operations failed (%.2f%%)%s", p.Phase, e, n, 100*float64(e)/float64(n), first))
		}
	}
	// Failed moves do not make the workload's numbers wrong, but a run where none succeeded
	// measured no move at all.
	if moves != nil && moves.Done == 0 && moves.Failed > 0 {
		failed = append(failed, fmt.Sprintf("--move-chunks: all %d chunk moves failed; first error: %s", moves.Failed, moves.FirstError))
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	return nil
}

// progressLine is one progress report of a running phase.
func progressLine(p bench.Progress) string {
	secs := p.Elapsed.Seconds()
	return fmt.Sprintf("humongo bench: %s: %d/%d ops (%.0f%%) in %.1fs, %.0f ops/s, %d errors",
		p.Phase, p.Done, p.Target, 100*float64(p.Done)/float64(max(p.Target, 1)), secs, float64(p.Done)/max(secs, 1e-9), p.Errors)
}
