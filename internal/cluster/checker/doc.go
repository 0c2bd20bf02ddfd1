// Package checker holds the history checkers of Humongo's fault-injection tests (ARCHITECTURE.md,
// testing tier 5): a workload records what clients were told, a nemesis kills, pauses and
// partitions processes, and afterwards a checker decides whether the database kept its promises.
//
//   - LostWrites: every acknowledged write must survive (spec/replication.md: a write
//     acknowledged with w:"majority" is never rolled back; spec/execution.md: a j:true write
//     survives kill -9). Missing documents and documents older than acknowledged are reported.
//   - CheckRegister: linearizability of single-document registers (read, write,
//     compare-and-set) with porcupine; writes whose outcome is unknown are modelled as
//     operations that never return, so they may take effect at any later point or not at all.
//   - CheckListAppend: Elle's list-append analysis for transactions (Kingsbury and Alvaro,
//     "Elle: Inferring Isolation Anomalies from Experimental Observations", VLDB 2020). Because
//     appends are unique and reads return whole lists, every read reveals a prefix of the key's
//     version order, so write-write, write-read and read-write dependencies can be inferred
//     without knowing the database's internal order; cycles in the dependency graph are
//     classified as Adya's G0, G1c, G-single and G2, and non-cyclic anomalies (G1a aborted read,
//     G1b intermediate read, duplicate elements, incompatible orders) are found directly.
//     CheckListAppendFinal adds a read of every key's final list, taken after the faults are
//     healed, as one more transaction, and reports each committed append it lacks (LostCommit:
//     an acknowledged commit was lost).
//
// The checkers are pure: they take a recorded history and return a report, so they are unit
// tested on hand-written histories, good and bad, with no database involved.
package checker
