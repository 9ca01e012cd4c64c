package daemon

import "github.com/snagdev/snag/internal/ops"

// graphOps are the operations of ... (filled in as they move from their
// hand-written HTTP handlers).
func (d *Daemon) graphOps(hs ops.Handlers) {}
