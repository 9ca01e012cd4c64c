package daemon

import "github.com/snagdev/snag/internal/ops"

// teamOps are the operations of ... (filled in as they move from their
// hand-written HTTP handlers).
func (d *Daemon) teamOps(hs ops.Handlers) {}
