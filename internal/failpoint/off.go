//go:build !failpoints

package failpoint

import "context"

// Enabled reports whether this binary was built with the failpoints tag.
const Enabled = false

// Arm does nothing in a build without the failpoints tag: Env is ignored.
func Arm() error { return nil }

// Armed reports whether any failpoint is armed: never, in this build.
func Armed() bool { return false }

// Hit does nothing in this build.
func Hit(op, step string) error { return nil }

// WithOp returns ctx as it is in this build.
func WithOp(ctx context.Context, op string) (context.Context, func()) { return ctx, func() {} }

// FileStep does nothing in this build.
func FileStep(step string) error { return nil }

// TxStep does nothing in this build.
func TxStep(ctx context.Context, step string) error { return nil }
