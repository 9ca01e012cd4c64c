package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	daemonpkg "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snagdtest"
)

// The test binary doubles as an outside process holding snag.db's write
// lock: with SNAG_TEST_DBLOCK set to the database's path it opens it, runs
// BEGIN IMMEDIATE, prints "locked", holds the lock for
// SNAG_TEST_DBLOCK_FOR, rolls back and exits, as a sqlite3 shell would.
func init() {
	if path := os.Getenv("SNAG_TEST_DBLOCK"); path != "" {
		os.Exit(dbLockMain(path))
	}
}

func dbLockMain(path string) int {
	hold, err := time.ParseDuration(os.Getenv("SNAG_TEST_DBLOCK_FOR"))
	if err != nil {
		fmt.Println("err", err)
		return 1
	}
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		fmt.Println("err", err)
		return 1
	}
	defer conn.Close()
	conn.SetBusyTimeout(10 * time.Second)
	if err := sqlitex.ExecuteTransient(conn, "BEGIN IMMEDIATE", nil); err != nil {
		fmt.Println("err", err)
		return 1
	}
	fmt.Println("locked")
	time.Sleep(hold) // the scenario: another process holds the write lock this long
	sqlitex.ExecuteTransient(conn, "ROLLBACK", nil)
	return 0
}

// holdDBLock starts a process that holds root's snag.db write lock for
// hold, and returns once it holds it; the channel closes when it exits.
func holdDBLock(t *testing.T, root string, hold time.Duration) <-chan struct{} {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SNAG_TEST_DBLOCK="+filepath.Join(root, ".snag", "snag.db"), "SNAG_TEST_DBLOCK_FOR="+hold.String())
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock holder: %q", line)
	}
	go io.Copy(io.Discard, out)
	return done
}

// sqliteWords are SQLite's own words for a lock, which must never reach a
// client.
var sqliteWords = []string{"SQLITE_", "database is locked"}

// TestS8_OutsideWriteLock: another process holds a write lock on snag.db.
// For 3 s (less than the index's busy timeout) claims wait it out and
// succeed. Held longer than a claim can wait, the claim gets a retryable
// 503 with Retry-After and snag's words, not SQLite's, and changes
// nothing; once the lock is gone the same claim succeeds. snag.db passes
// its checks afterwards.
func TestS8_OutsideWriteLock(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := startDaemon(t, root, home)
	var agents []*agent
	for range 3 {
		agents = append(agents, startAgent(t, d, ""))
	}

	start := time.Now()
	held := holdDBLock(t, root, 3*time.Second)
	answers := make(chan string, 3)
	for i, ref := range []string{"SNAG-11", "SNAG-12", "SNAG-4"} {
		go func() { answers <- agents[i].do("claim " + ref) }()
	}
	for range 3 {
		ans := <-answers
		for _, w := range sqliteWords {
			if strings.Contains(ans, w) {
				t.Errorf("SQLite's words reached a client: %s", ans)
			}
		}
		if !strings.HasPrefix(ans, "ok ") && !strings.Contains(ans, `"busy"`) {
			t.Errorf("claim under a 3 s lock: %s; want ok or a busy 503", ans)
		}
	}
	t.Logf("three claims under a 3 s outside lock answered after %s", time.Since(start).Round(time.Millisecond))
	<-held

	// Longer than a claim waits (index.BusyTimeout).
	var s struct{ ID int64 }
	if code := d.do("POST", "/sessions", map[string]any{"name": "LOCKTEST"}, &s); code != 201 {
		t.Fatalf("register: %d", code)
	}
	claim := func() (*http.Response, string) {
		req, _ := http.NewRequest("POST", d.url("/tasks/SNAG-5/claim"), strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(daemonpkg.SessionHeader, strconv.FormatInt(s.ID, 10))
		resp := d.raw(req)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	before, _ := os.ReadFile(filepath.Join(root, ".snag", "tasks", "SNAG-5 - Coupon error message vanishes before it can be read.md"))
	start = time.Now()
	held = holdDBLock(t, root, index.BusyTimeout+3*time.Second)
	resp, body := claim()
	t.Logf("a claim under a longer lock answered %d after %s: %s", resp.StatusCode, time.Since(start).Round(time.Millisecond), body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"busy"`) {
		t.Errorf("claim under a long lock: %d Retry-After %q %s; want a busy 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	for _, w := range sqliteWords {
		if strings.Contains(body, w) {
			t.Errorf("SQLite's words reached a client: %s", body)
		}
	}
	after, _ := os.ReadFile(filepath.Join(root, ".snag", "tasks", "SNAG-5 - Coupon error message vanishes before it can be read.md"))
	if string(before) != string(after) {
		t.Error("the refused claim changed the task file")
	}
	<-held
	if resp, body := claim(); resp.StatusCode != 200 {
		t.Errorf("the claim once the lock is gone: %d %s", resp.StatusCode, body)
	}
	crCheck(t, d)
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	if err := index.Check(t.Context(), filepath.Join(root, ".snag", "snag.db"), true); err != nil {
		t.Errorf("snag.db after the locks: %v", err)
	}
}

// TestS9_DiskFullInjected: the disk fills up while a claim writes its temp
// file. ENOSPC is injected by the failpoint hook at that step (a real full
// disk needs a small filesystem: see TestS9_DiskFullTmpfs). The task file
// keeps its bytes, no temp file is left, the lease is rolled back, and the
// client reads an error that says what to do. The next claim works.
func TestS9_DiskFullInjected(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"temp-created", "temp-written", "temp-synced"} {
		t.Run(step, func(t *testing.T) {
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=claim:"+step+"=enospc")
			a := startAgent(t, d, "")
			before := crFiles(t, root)
			raw := readSample(t, root)
			ans := a.do("claim SNAG-11")
			if !strings.Contains(ans, "err 507") || !strings.Contains(ans, "disk_full") || !strings.Contains(ans, "free some space") {
				t.Errorf("claim on a full disk: %s; want 507 disk_full naming the fix", ans)
			}
			if readSample(t, root) != raw {
				t.Error("the task file changed")
			}
			files, leases := crCheck(t, d)
			if f := files["SNAG-11"]; f != before["SNAG-11"] {
				t.Errorf("after the failed claim: %+v", f)
			} else if l, ok := leases[f.ID]; ok {
				t.Errorf("the failed claim left a lease: %+v", l)
			}
			a.claim("SNAG-11") // room again (the failpoint fires once)
		})
	}
}

func readSample(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, samplePath))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestS9_DiskFullTmpfs: the same with a real full disk, the project on a
// small tmpfs filled to the brim. Mounting needs privileges: without them
// the test is skipped (TestS9_DiskFullInjected covers the path), except in
// CI, which runs as root and fails it instead.
func TestS9_DiskFullTmpfs(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount a 4 MiB tmpfs (CI runs as root, which may): %v %s", err, out)
		}
		t.Skipf("no tmpfs (mount needs privileges): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	root := filepath.Join(mnt, "p")
	snagdtest.CopySample(t, root)
	d := startDaemon(t, root, filepath.Join(t.TempDir(), "home"))
	a := startAgent(t, d, "")
	raw := readSample(t, root)
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	ans := a.do("claim SNAG-11")
	t.Logf("claim on a full tmpfs: %s", ans)
	if !strings.Contains(ans, "err 507") || !strings.Contains(ans, "free some space") {
		t.Errorf("claim on a full disk: %s; want 507 naming the fix", ans)
	}
	if readSample(t, root) != raw {
		t.Error("the task file changed")
	}
	os.Remove(filler)
	crCheck(t, d)
	a.claim("SNAG-11")
}

// s3Settle checkpoints snag.db into its main file and leaves WAL mode, so
// that a patch to the file is what the next open reads.
func s3Settle(t *testing.T, path string) {
	t.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sqlitex.ExecuteTransient(conn, "PRAGMA journal_mode = DELETE", nil); err != nil {
		t.Fatal(err)
	}
}

func s3Patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestS3_CorruptDB: snag.db is damaged while snagd is down. At start snagd
// finds it, moves it aside (with its -wal and -shm) as
// snag.db-corrupt-<time>, says so in its log, and rebuilds the index from
// the files; the task an agent had claimed is claimed again, by a detached
// lease in the agent's name, with an epoch above any before, which the
// agent gets back when it registers again. A deleted WAL loses what it
// held: the files fill the gap.
func TestS3_CorruptDB(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		kill   bool // SIGKILL, leaving the WAL; else a clean stop, settled
		damage func(t *testing.T, db string)
		aside  bool
	}{
		{"zeroed header", false, func(t *testing.T, db string) { s3Patch(t, db, 0, make([]byte, 100)) }, true},
		{"flipped page", false, func(t *testing.T, db string) {
			b, _ := os.ReadFile(db)
			ps := int(b[16])<<8 | int(b[17])
			for i := ps; i < 2*ps; i++ {
				b[i] ^= 0xff
			}
			os.WriteFile(db, b, 0o644)
		}, true},
		{"wrong application id", false, func(t *testing.T, db string) { s3Patch(t, db, 68, []byte{1, 2, 3, 4}) }, true},
		{"old schema version", false, func(t *testing.T, db string) { s3Patch(t, db, 60, []byte{0, 0, 0, 1}) }, true},
		{"unknown schema version", false, func(t *testing.T, db string) { s3Patch(t, db, 60, []byte{0, 0, 0, 99}) }, true},
		{"truncated", false, func(t *testing.T, db string) {
			fi, _ := os.Stat(db)
			os.Truncate(db, fi.Size()/2)
		}, true},
		{"foreign database", false, func(t *testing.T, db string) {
			os.Remove(db)
			conn, err := sqlite.OpenConn(db, sqlite.OpenReadWrite|sqlite.OpenCreate)
			if err != nil {
				t.Fatal(err)
			}
			sqlitex.ExecuteScript(conn, "CREATE TABLE photos (path TEXT); INSERT INTO photos VALUES ('a.jpg');", nil)
			conn.Close()
		}, true},
		{"WAL deleted", true, func(t *testing.T, db string) {
			if _, err := os.Stat(db + "-wal"); err != nil {
				t.Fatalf("no WAL to delete: %v", err)
			}
			os.Remove(db + "-wal")
			os.Remove(db + "-shm")
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			db := filepath.Join(root, ".snag", "snag.db")
			d := startDaemon(t, root, home)
			a := startAgent(t, d, "")
			_, epoch := a.claim("SNAG-11")
			if c.kill {
				d.cmd.Process.Kill()
			} else {
				d.cmd.Process.Signal(syscall.SIGTERM)
			}
			<-d.done
			a.cmd.Process.Kill()
			<-a.done
			if !c.kill {
				s3Settle(t, db)
			}
			c.damage(t, db)

			d2 := startDaemon(t, root, home)
			log := d2.log.String()
			asides, _ := filepath.Glob(db + "-corrupt-*")
			if c.aside {
				if len(asides) == 0 || !strings.Contains(log, "moved it aside") || !strings.Contains(log, "moved_to="+asides[0]) {
					t.Errorf("the damaged snag.db was not moved aside, or the log does not say where (aside: %v)\n%s", asides, log)
				}
				if !strings.Contains(log, "index rebuilt") {
					t.Errorf("the log does not say the index was rebuilt\n%s", log)
				}
			} else {
				t.Logf("moved aside: %v", asides)
			}
			_, f := s3Detached(t, d2, a.Name, epoch, c.aside)
			var s struct{ ID int64 }
			if code := d2.do("POST", "/sessions", map[string]any{"name": a.Name}, &s); code != 201 {
				t.Fatalf("register again: %d", code)
			}
			var out struct {
				Leases []struct {
					TaskID    string `json:"task_id"`
					SessionID int64  `json:"session_id"`
					Detached  bool
				}
			}
			d2.get("/sessions", &out)
			for _, l := range out.Leases {
				if l.TaskID == f.ID && (l.Detached || l.SessionID != s.ID) {
					t.Errorf("the agent registered again but did not get its lease back: %+v (session %d)", l, s.ID)
				}
			}
		})
	}
}

// TestS3_KilledWhileRebuilding: snagd is killed in the middle of building
// its index from the task files, where there was no usable snag.db (a
// damaged one it moved aside, or one someone deleted): before the build,
// with its rows written and not yet indexed, and with its file whole and
// synced but not yet renamed into place. The next start builds it again,
// and loses nothing: every task is indexed as its file says, the claimed
// task has a detached lease in its agent's name, with an epoch above any
// before where the old snag.db was damaged (the fence the cut-off start
// owed), and nothing of the cut-off build is left.
func TestS3_KilledWhileRebuilding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, step string
		damaged    bool
	}{
		{"damaged, before the build", "rebuilding", true},
		{"damaged, rows written", index.StepBuildLoaded, true},
		{"damaged, file synced", index.StepBuildSynced, true},
		{"deleted, rows written", index.StepBuildLoaded, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			db := filepath.Join(root, ".snag", "snag.db")
			d := startDaemon(t, root, home)
			a := startAgent(t, d, "")
			_, epoch := a.claim("SNAG-11")
			d.cmd.Process.Signal(syscall.SIGTERM)
			<-d.done
			a.cmd.Process.Kill()
			<-a.done
			if c.damaged {
				s3Settle(t, db)
				s3Patch(t, db, 0, make([]byte, 100))
			} else {
				for _, sfx := range []string{"", "-wal", "-shm"} {
					os.Remove(db + sfx)
				}
			}

			k := spawnEnv(t, root, home, []string{daemonpkg.FailpointEnv + "=start:" + c.step}, "--log", "debug")
			crKilled(t, k, c.step)
			if _, err := os.Stat(db); err == nil {
				t.Fatalf("killed at %s, snagd left a snag.db in place", c.step)
			}

			d2 := startDaemon(t, root, home)
			said := "index built from the task files: there was no snag.db"
			if c.damaged {
				said = "index rebuilt from the task files, after a start cut off while rebuilding it"
			}
			if log := d2.log.String(); !strings.Contains(log, said) {
				t.Errorf("the second start does not say %q\n%s", said, log)
			}
			if asides, _ := filepath.Glob(db + "-corrupt-*"); c.damaged && len(asides) == 0 {
				t.Error("the damaged snag.db was not kept aside")
			}
			for _, p := range []string{db + index.BuildSuffix, db + index.BuildSuffix + "-fts", db + "-fence"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s is left after the second start", filepath.Base(p))
				}
			}
			files, _ := s3Detached(t, d2, a.Name, epoch, c.damaged)
			if len(files) < 10 {
				t.Errorf("%d task files: the sample should have more", len(files))
			}
		})
	}
}

// s3Detached checks, after a start that rebuilt the index, that the files
// and the index agree (crCheck) and that SNAG-11, which the agent holder
// had claimed, is claimed with a detached lease in its name; with fenced,
// that the lease's epoch is above every one before the rebuild (epoch). It
// returns the task files by key and SNAG-11's.
func s3Detached(t *testing.T, d *daemon, holder string, epoch int64, fenced bool) (map[string]crFile, crFile) {
	t.Helper()
	files, leases := crCheck(t, d)
	f := files["SNAG-11"]
	l, ok := leases[f.ID]
	if f.Status != "claimed" || !ok || l.Holder != holder || !l.Detached {
		t.Fatalf("SNAG-11: %+v, lease %+v; want claimed by %s with a detached lease", f, l, holder)
	}
	if fenced && l.Epoch <= epoch+1_000_000 {
		t.Errorf("the rebuilt lease's epoch %d is not above the old ones (%d)", l.Epoch, epoch)
	}
	return files, f
}

// TestS3_503WhileRebuilding: while snagd rebuilds a damaged snag.db (held
// there by a failpoint that sleeps), every request but /health gets 503
// with Retry-After; once it answers, it answers with every task.
func TestS3_503WhileRebuilding(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := startDaemon(t, root, home)
	want := len(crRows(t, d))
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	db := filepath.Join(root, ".snag", "snag.db")
	s3Settle(t, db)
	s3Patch(t, db, 0, make([]byte, 100))
	tok, _ := os.ReadFile(filepath.Join(home, "token"))

	type seen struct{ unavailable, ok int }
	result := make(chan seen)
	go func() {
		var s seen
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			b, err := os.ReadFile(filepath.Join(root, ".snag", ".port"))
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strings.TrimSpace(string(b))+"/tasks?all=true&limit=1000", nil)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			var page struct{ Tasks []json.RawMessage }
			json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
				s.unavailable++
			case resp.StatusCode == 200 && len(page.Tasks) == want:
				s.ok++
				result <- s
				return
			default:
				t.Errorf("while rebuilding: %d with %d tasks (Retry-After %q); want 503 with Retry-After, or all %d tasks",
					resp.StatusCode, len(page.Tasks), resp.Header.Get("Retry-After"), want)
				result <- s
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("snagd never answered with the tasks")
		result <- s
	}()
	crSpawn(t, root, home, daemonpkg.FailpointEnv+"=start:rebuilding=sleep:2s")
	s := <-result
	t.Logf("%d answers of 503 while rebuilding, then the tasks", s.unavailable)
	if s.unavailable == 0 {
		t.Error("no 503 while snagd rebuilt its index for 2 s")
	}
}

// TestS3_QuickCheckUnlessUntouched: snagd runs SQLite's quick check of
// snag.db at start unless the file and its WAL are as the last clean stop
// left them. A first start has no record of a clean stop and checks; the
// start after a clean stop does not; a touch that puts the modification
// time back (only the change time moves) makes the next start check again.
func TestS3_QuickCheckUnlessUntouched(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	db := filepath.Join(root, ".snag", "snag.db")
	run := func(want bool, stop os.Signal) {
		t.Helper()
		d := startDaemon(t, root, home)
		if got := strings.Contains(d.log.String(), "quick_check="+strconv.FormatBool(want)); !got {
			t.Errorf("want quick_check=%v at this start\n%s", want, d.log.String())
		}
		d.cmd.Process.Signal(stop)
		<-d.done
	}
	run(true, syscall.SIGTERM) // no record yet
	run(false, syscall.SIGTERM)
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(db, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	run(true, syscall.SIGTERM) // touched: its change time moved
	run(false, syscall.SIGTERM)
}
