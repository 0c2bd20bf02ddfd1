// Package balancer owns the balancer of the config server primary (spec:
// /work/shared/spec/sharding.md "Auto-balancing", "What happens during a balancer round",
// "Jumbo Chunks"; checklist-sharding.md section 3 "Balancer", "Round", "Jumbo"; MongoDB 7.0's
// Balancer, BalancerPolicy, BalancerChunkSelectionPolicy and BalancerConfiguration).
//
//   - policy.go is the pure policy: a collection's distribution (chunks, zone ranges, its data
//     size per shard) and the shards (draining, zones) in, the zone-boundary splits and the
//     round's migrations out, no IO. As 7.0 does, it balances by data size: chunks off
//     draining shards first, then chunks outside their zone's shards, then, per zone and for
//     the unzoned rest, from the shard with the most data of the collection to the least
//     loaded one while the donor is above the ideal (data / shards) and the two differ by at
//     least three maximum chunk sizes. One migration per shard per round; jumbo chunks are
//     never scheduled. sim_test.go runs it round after round in a seeded simulation.
//   - settings.go reads config.settings (balancer mode, activeWindow, throttling options,
//     chunksize).
//   - loop.go is the balancer thread: started when the node becomes a writable primary and
//     stopped when it steps down, one round every balancerRoundIntervalMs (10 s) while
//     idle, reading the catalog through the node's own commands, splitting chunks at zone
//     boundaries, asking shards for their data sizes (_shardsvrGetStatsForBalancing) and
//     sending _shardsvrMoveRange to the donors concurrently, flagging a chunk jumbo when its
//     donor answers ChunkTooBig, and logging each round to config.actionlog.
package balancer
