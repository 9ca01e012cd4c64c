package project

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/snagdev/snag/atomicfile"
)

// SequenceFile, in a repository's state folder (gitdir.State), holds the
// last number minted of each kind of key ("task" for SNAG-n, "note" for
// N-n) in any worktree of the repository on this machine, one "kind
// number" line each.
const SequenceFile = "keys"

// Reserve takes the next number of kind from the sequences in the state
// folder: above floor and above every number taken before, written down
// before it is returned, under a lock of the file, so that snagd and a
// snag doctor --fix run beside it never take one number twice. above, when
// set, is called under the lock with the number it would take and may
// raise it (the other worktrees' files).
func Reserve(state, kind string, floor int, above func(n int) int) (int, error) {
	if err := os.MkdirAll(state, 0o755); err != nil {
		return 0, fmt.Errorf("make %s: %w: check that it can be written", state, err)
	}
	lock, err := os.OpenFile(filepath.Join(state, SequenceFile+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("lock the key sequences in %s: %w: check that it can be written", state, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("lock the key sequences in %s: %w", state, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	path := filepath.Join(state, SequenceFile)
	seq, err := readSequences(path)
	if err != nil {
		return 0, err
	}
	n := max(floor, seq[kind]+1)
	if above != nil {
		n = max(n, above(n))
	}
	seq[kind] = n
	if err := writeSequences(path, seq); err != nil {
		return 0, fmt.Errorf("%s key: %w", kind, err)
	}
	return n, nil
}

// readSequences reads the sequences file; a missing one is empty.
func readSequences(path string) (map[string]int, error) {
	seq := map[string]int{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return seq, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w: check that it can be read", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		kind, num, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if !ok || err != nil || n < 0 {
			continue // a damaged line counts for nothing: the files still do
		}
		seq[kind] = max(seq[kind], n)
	}
	return seq, nil
}

// writeSequences replaces the sequences file.
func writeSequences(path string, seq map[string]int) error {
	kinds := make([]string, 0, len(seq))
	for k := range seq {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s %d\n", k, seq[k])
	}
	return atomicfile.WriteFile(path, []byte(b.String()), 0o644)
}
