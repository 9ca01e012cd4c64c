//go:build unix

package index_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snag"
)

// TestSymlinkToAFIFOIsNeverOpened links a task file to a named pipe: opening
// the pipe for reading would block until a writer came, so a scan that
// returns proves the link was never followed.
func TestSymlinkToAFIFOIsNeverOpened(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mkfifo: %v", err)
		}
		t.Skipf("no named pipes here: %v", err)
	}
	for _, via := range []string{"SyncFile", "Scan"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			name := "SNAG-3 - pipe.md"
			e.symlink(fifo, name)
			done := make(chan error, 1)
			go func() {
				var err error
				if via == "Scan" {
					_, err = e.db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true})
				} else {
					_, err = e.db.SyncFile(e.ctx, e.dir, name)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s blocked: it opened the pipe behind the link", via)
			}
			if it := e.mustGet("SNAG-3"); it.State != snag.StateInvalid || it.Task != nil {
				t.Errorf("row = %+v, want invalid without data", it.Row)
			}
		})
	}
}
