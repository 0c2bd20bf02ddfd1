package commands

// Writes to views (issue 6 item 4): insert, update, delete and findAndModify on a view fail
// with 166 CommandNotSupportedOnView before anything is written, and in particular before
// implicit collection creation could create a collection under the view's name.

import (
	"context"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// writeRejectView fails when ns is a view (views are resolved by agg_views.go's viewLookup).
//
// The check runs before the write takes its collection lock, so a view created concurrently
// between the check and an implicit collection creation is not caught here; create of a view
// refuses a namespace that is already a collection, so the two cannot both exist.
func writeRejectView(ctx context.Context, env *service.Env, ns string) error {
	_, _, isView, err := viewLookup(ctx, env, ns)
	if err != nil {
		return err
	}
	if isView {
		return mongoerr.Newf(mongoerr.CommandNotSupportedOnView, "Namespace %s is a view, not a collection", ns)
	}
	return nil
}
