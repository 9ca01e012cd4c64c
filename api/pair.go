package api

import "time"

// The browser extension's routes and credential.
const (
	// PairPath is the route the extension's popup sends a pairing code
	// to, from its chrome-extension:// origin, for a capture credential.
	PairPath = "/pair"
	// CaptureCredentialPrefix starts every capture credential, so that one
	// is told from snagd's token at a glance (and by snagd).
	CaptureCredentialPrefix = "snagcap_"
	// PairingCodeTTL is how long a pairing code works.
	PairingCodeTTL = 5 * time.Minute
)

// PairingCode is the answer of POST /pairing-codes (snag pair): a one-time
// code for the browser extension's popup, with the address it is for.
type PairingCode struct {
	// Line is what the person types into the popup: the address and the
	// code, as "127.0.0.1:7654 K7M-2QX".
	Line string `json:"line"`
	// Address is snagd's, 127.0.0.1 and its port.
	Address string `json:"address"`
	// Code is six letters and digits that cannot be mistaken for one
	// another (no 0, O, 1, I, L or U), in two groups of three.
	Code string `json:"code"`
	// Expires is when the code stops working (5 minutes on); it works
	// once, and at most 3 codes are open at a time.
	Expires time.Time `json:"expires"`
}

// PairRequest is the body of POST /pair: the code snag pair printed, as
// the person typed it (case, spaces and the dash do not matter).
type PairRequest struct {
	// Code is the pairing code.
	Code string `json:"code"`
}

// Paired is the answer of POST /pair (201): the capture credential, which
// snagd accepts on POST /captures alone, and only from the origin that
// paired. snagd keeps only its hash: this is the one time it is shown.
type Paired struct {
	// Credential is snagcap_ and 43 characters of base64 (32 random
	// bytes): the extension sends it as Authorization: Bearer.
	Credential string `json:"credential"`
	// Origin is the extension's origin it is bound to.
	Origin string `json:"origin"`
	// Project is the project root of the snagd that paired.
	Project string `json:"project"`
}

// CaptureCredential is one paired extension, as snag pair --list shows it.
type CaptureCredential struct {
	// Origin is the extension's, chrome-extension://<id>.
	Origin string `json:"origin"`
	// Project is the project root whose snagd accepts it.
	Project string `json:"project"`
	// Paired is when the code was exchanged for it.
	Paired time.Time `json:"paired"`
}

// CaptureCredentials is the answer of GET /capture-credentials: every
// paired extension of this user, for every project, oldest first.
type CaptureCredentials struct {
	// Credentials are the paired extensions.
	Credentials []CaptureCredential `json:"credentials"`
}

// Revoked is the answer of DELETE /capture-credentials (snag pair
// --revoke).
type Revoked struct {
	// Revoked counts the capture credentials revoked, of every project:
	// each extension must pair again.
	Revoked int `json:"revoked"`
	// Codes counts the pairing codes voided with them.
	Codes int `json:"codes"`
}
