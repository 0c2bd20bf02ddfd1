package applier

import (
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// SetBeforeBatchCompletesHook installs f as the hook that runs after a batch's writes committed
// and before lastApplied moves (every applier in the process calls it; f filters by engine).
// The returned function removes it.
func SetBeforeBatchCompletesHook(f func(e *storage.Engine, entries []*oplog.Entry)) (remove func()) {
	beforeBatchCompletes.Store(&f)
	return func() { beforeBatchCompletes.Store(nil) }
}
