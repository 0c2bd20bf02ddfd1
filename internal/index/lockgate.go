package index

import (
	"context"

	"humongo/internal/lock"
)

// LockManagerBlockWrites returns a BuildOptions.BlockWrites that takes collection ns in MODE_S
// through the lock manager (writers hold MODE_IX for their whole unit, so MODE_S waits for
// them and holds new ones back while readers continue — the spec's S-locked drain). The
// acquisition ignores cancellation: an index build cannot give up half-way through installing
// or removing its interceptor. The caller must not hold locks on ns when calling Build.
func LockManagerBlockWrites(mgr *lock.Manager, ns string) func() (unblock func(), err error) {
	return func() (func(), error) {
		l := mgr.NewLocker()
		s, err := l.CollectionLock(context.WithoutCancel(context.Background()), ns, lock.ModeS)
		if err != nil {
			return nil, err
		}
		return func() { _ = s.Release() }, nil
	}
}
