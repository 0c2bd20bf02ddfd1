package primaryonly

import (
	"context"
	"fmt"
	"slices"
)

// Phase is one idempotent step of an instance.
type Phase struct {
	Name string
	Run  func(ctx context.Context) error
}

// RunPhases runs phases in order starting at current, the phase the state document records
// ("" before the first): phases before current are skipped (done by an earlier primary),
// current itself is redone, and every later phase is checkpointed (checkpoint, majority
// committed) before it runs, so that a crash in it resumes it and not an earlier one.
// MongoDB's _buildPhaseHandler.
func RunPhases(ctx context.Context, current string, phases []Phase, checkpoint func(ctx context.Context, name string) error) error {
	start := 0
	if current != "" {
		start = slices.IndexFunc(phases, func(p Phase) bool { return p.Name == current })
		if start < 0 {
			return fmt.Errorf("unknown phase %q in the state document", current)
		}
	}
	for i := start; i < len(phases); i++ {
		p := phases[i]
		if p.Name != current {
			if err := checkpoint(ctx, p.Name); err != nil {
				return fmt.Errorf("checkpoint phase %s: %w", p.Name, err)
			}
			current = p.Name
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.Run(ctx); err != nil {
			return err
		}
	}
	return nil
}
