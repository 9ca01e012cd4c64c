package client

import (
	"context"

	"github.com/snagdev/snag/api"
)

// PairingCode mints a one-time pairing code for the browser extension
// (POST /pairing-codes, snag pair).
func (k Caller) PairingCode(ctx context.Context, req api.MoveRequest) (api.PairingCode, error) {
	var out api.PairingCode
	err := k.do(ctx, "POST", "/pairing-codes", req, &out)
	return out, err
}

// CaptureCredentials lists the paired extensions (GET
// /capture-credentials, snag pair --list).
func (k Caller) CaptureCredentials(ctx context.Context) (api.CaptureCredentials, error) {
	var out api.CaptureCredentials
	err := k.do(ctx, "GET", "/capture-credentials", nil, &out)
	return out, err
}

// RevokeCaptureCredentials revokes every capture credential (DELETE
// /capture-credentials, snag pair --revoke).
func (k Caller) RevokeCaptureCredentials(ctx context.Context) (api.Revoked, error) {
	var out api.Revoked
	err := k.do(ctx, "DELETE", "/capture-credentials", nil, &out)
	return out, err
}
