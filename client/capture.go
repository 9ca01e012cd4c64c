package client

import (
	"context"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
)

// Capture makes a capture an inbox task (POST /captures).
func (k Caller) Capture(ctx context.Context, req api.CaptureRequest) (api.Captured, error) {
	return call(ctx, k, ops.Capture, req)
}
