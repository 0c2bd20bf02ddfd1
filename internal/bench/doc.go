// Package bench is the engine of `humongo bench`: YCSB-style workloads against any
// MongoDB-compatible server (ARCHITECTURE.md, testing tier 7; issue 4 "humongo operator tool").
//
// It is YCSB's CoreWorkload, reimplemented: records are documents
// {_id: "user<fnv64(n)>", field0..fieldN-1: random strings} (YCSB's hashed key order, so loading
// record numbers in sequence scatters writes over the key space); workloads A–F have YCSB's
// operation mixes and default key distributions; key choice uses YCSB's generators, ported in
// generator.go — ZipfianGenerator (Gray et al.'s method, constant 0.99), ScrambledZipfianGenerator
// (a fixed 10^10-item Zipfian folded onto the keys by FNV hash), SkewedLatestGenerator and the
// AcknowledgedCounterGenerator that keeps readers from choosing keys whose insert has not been
// acknowledged. Beyond YCSB, "update" (single-record updates only) and "txn" price a
// multi-document transaction (spec/replication.md, "Transactions"): each txn operation moves a
// random amount between two distinct records chosen from the key distribution (uniform by
// default, as for "update"), $inc of a numeric "balance" field by -x on one and +x on the other
// in one transaction that MongoStore runs with the driver's Session.WithTransaction (which
// retries TransientTransactionError and UnknownTransactionCommitResult as applications do) and
// commits with w:"majority" unless --write-concern names another; the sum of all balances
// stays 0. With Config.CrossShard (--cross-shard; a collection sharded on {_id: 1} behind a
// router, shards.go) the records are spread over two shards and the transfers alternate
// between two records of one shard (TXN, committed directly) and of two (TXN-CROSS-SHARD,
// two-phase commit), each type with its own latencies. "scan" is workload E without its inserts (uniform start keys); with
// ScanLengthDistribution "constant" every scan is the same find({_id: {$gte: k}}).sort({_id: 1})
// .limit(N), which through a router on a hashed _id key is a scatter-gather merge-sorted find.
// MongoOptions.ShardKey shards the collection on _id through a router first (enableSharding,
// shardCollection), so a workload runs against a sharded collection. Deviations from YCSB, each deliberate: "latest" can also pick record 0; "uniform"
// follows acknowledged inserts instead of the loaded range only; when a Zipfian's item count
// grows, eta is recomputed for the new count (YCSB keeps using the initial count there).
//
// The runner (runner.go) starts Config.Threads goroutines, each with its own PCG random source
// (seeded from Config.Seed and the thread index), its own value buffers and its own latency
// histograms; they claim operations from one atomic counter until Ops are done, the Duration
// cap passes or the context is cancelled, and their histograms are merged afterwards, so the hot
// path shares nothing but the counter. Operations cut short by cancellation are not counted.
// Duration caps the workload's own phase only: a load before it (Drop, or the automatic load
// when Store.Count finds fewer than Records records) always completes, so no read looks for a
// record that was never loaded; the automatic load keeps records already there and is announced
// through Config.Notice. A workload's inserts take key numbers after the records present, so a
// second run of D or E does not collide with the first's. Config.Progress, if set, receives the
// running counts every ProgressInterval from a goroutine the phase owns and stops.
// The database is reached through the Store interface (YCSB's DB); MongoStore implements it
// with the official Go driver v2 and tests use an in-memory store.
//
// Latency is kept in Histogram (histogram.go), a log-linear histogram in the manner of
// HdrHistogram: exact below 256 ns, then 128 linear buckets per power of two, which bounds the
// relative error of every reported percentile below 1/128 (< 1%) with fixed memory.
//
// # JSON report (humongo bench --json)
//
//	{
//	  "workload": "c",                   // a..f, load, ping, scan, update or txn
//	  "target": "mongodb://127.0.0.1:27017", // password, if any, masked
//	  "config": {
//	    "records": 1000, "ops": 10000, "threads": 1, "fieldCount": 10, "fieldLength": 100,
//	    "distribution": "zipfian",       // effective key distribution
//	    "maxScanLength": 100, "drop": false, "durationSeconds": 0, "seed": 1,
//	    "scanLengthDistribution": "uniform"  // or "constant"
//	  },
//	  "labels": {"writeConcern": "...", "readConcern": "...", "namespace": "ycsb.usertable", "shardKey": "hashed"},
//	  "interrupted": false,              // true if SIGINT cut the run short
//	  "phases": [                        // "load" first when it ran (workload load, --drop, or too few records)
//	    {
//	      "phase": "c",
//	      "stoppedBy": "completed",      // completed | duration | interrupted
//	      "elapsedSeconds": 1.234,
//	      "operations": 10000,           // completed operations, failed ones included
//	      "errors": 0,
//	      "throughput": 8103.7,          // operations per second
//	      "ops": [                       // one entry per operation type that ran
//	        {
//	          "op": "READ",              // READ UPDATE INSERT SCAN READ-MODIFY-WRITE PING TXN TXN-CROSS-SHARD
//	          "count": 10000, "errors": 0,
//	          "firstError": "...",       // omitted when errors is 0
//	          "latencyMicros": {"min": 52.1, "mean": 118.4, "p50": 101.2, "p95": 201.0, "p99": 350.3, "max": 2101.9}
//	        }
//	      ]
//	    }
//	  ]
//	}
//
// Latencies are microseconds; min, mean and max are exact, percentiles within 1% (rounded to
// 0.1 µs). A failed operation's latency is included in its type's histogram and counted in
// errors.
package bench
