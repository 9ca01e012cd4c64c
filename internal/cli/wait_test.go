package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/cli"
	"github.com/snagdev/snag/internal/cli/full"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/taskgen"
)

// TestFirstCommandAfterAutostartWaitsForTheRead: the first snag list in a
// project of 10,000 task files and no index starts snagd, which takes a
// while to read them all; the command waits for it (past ReadyWait, which
// the test makes tiny), says so on stderr with the number of files, and
// answers from the daemon, not from the files.
func TestFirstCommandAfterAutostartWaitsForTheRead(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("reads 10,000 task files")
	}
	dir := t.TempDir()
	snagd := filepath.Join(dir, "bin", "snagd")
	if err := snagdtest.Build(snagd, snagdtest.Snagd); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "p")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := layout.Init(root); err != nil {
		t.Fatal(err)
	}
	if err := taskgen.Write(filepath.Join(root, layout.Folder, "tasks"), 10000, 1); err != nil {
		t.Fatal(err)
	}
	t.Setenv(cli.SnagdEnv, snagd)
	t.Setenv("SNAG_HOME", filepath.Join(dir, "home"))
	t.Setenv("SNAG_PORT", strconv.Itoa(snagdtest.FreePort(t)))
	t.Setenv(cli.NoAutostartEnv, "")
	savedWait, savedAfter := client.ReadyWait, client.WaitingAfter
	client.ReadyWait, client.WaitingAfter = 50*time.Millisecond, 0
	t.Cleanup(func() { client.ReadyWait, client.WaitingAfter = savedWait, savedAfter })
	t.Cleanup(func() { stopDaemons(t.Log, root) })

	var stdout, stderr bytes.Buffer
	// Full is given so that, should the command fall back to the files, it
	// reads them here instead of running snagd's program in this one's place.
	code := cli.Main(context.Background(), []string{"list", "--json", "--limit", "1"},
		cli.Env{Dir: root, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Full: full.New()})
	if code != 0 {
		t.Fatalf("snag list exited %d\nstderr: %s", code, stderr.String())
	}
	var got struct {
		Source string `json:"source"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.Source != "daemon" {
		t.Errorf("snag list answered %s (%v); want source daemon\nstderr: %s", stdout.String(), err, stderr.String())
	}
	if want := "snag: waiting for snagd (pid "; !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "10,000 task files") {
		t.Errorf("stderr = %q; want it to say it waits for snagd reading 10,000 task files", stderr.String())
	}
}
