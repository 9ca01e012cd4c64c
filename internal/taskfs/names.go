package taskfs

import (
	"fmt"

	"github.com/snagdev/snag/internal/queue"
)

// Names returns the names of the entries [IsTaskFileName] accepts, without
// looking at the files: cheaper than [Dir.List] when only names matter.
func (d *Dir) Names() ([]string, error) {
	f, err := d.openForList()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	out := all[:0]
	for _, n := range all {
		if queue.IsTaskFileName(n) {
			out = append(out, n)
		}
	}
	return out, nil
}
