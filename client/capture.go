package client

import (
	"context"

	"github.com/snagdev/snag/api"
)

// Capture makes a capture an inbox task (POST /captures).
func (k Caller) Capture(ctx context.Context, req api.CaptureRequest) (api.Captured, error) {
	var out api.Captured
	err := k.do(ctx, "POST", "/captures", req, &out)
	return out, err
}
