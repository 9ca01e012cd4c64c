package daemon

import "github.com/snagdev/snag/internal/ops"

// sessionOps are the operations of ... (filled in as they move from their
// hand-written HTTP handlers).
func (d *Daemon) sessionOps(hs ops.Handlers) {}
