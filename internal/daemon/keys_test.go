package daemon_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	nameKey  = regexp.MustCompile(`^SNAG-(\d+)[ .]`)
	frontKey = regexp.MustCompile(`(?m)^key: SNAG-(\d+)\s*$`)
)

// diskKeys maps every alias number the task files use, by name or by
// frontmatter, to the files that use it.
func diskKeys(t *testing.T, tasks string) map[int][]string {
	t.Helper()
	ents, err := os.ReadDir(tasks)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int][]string{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		nums := map[int]bool{}
		if m := nameKey.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			nums[n] = true
		}
		b, err := os.ReadFile(filepath.Join(tasks, e.Name()))
		if err != nil {
			continue
		}
		if m := frontKey.FindSubmatch(b); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			nums[n] = true
		}
		for n := range nums {
			used[n] = append(used[n], e.Name())
		}
	}
	return used
}

func maxKey(used map[int][]string) int {
	m := 0
	for n := range used {
		m = max(m, n)
	}
	return m
}

// handTask is a task file as a person writes it by hand.
func handTask(i int, key, title string) []byte {
	return []byte(fmt.Sprintf("---\nid: tsk_01JD6Z3Q8R6V2X4N0H5K7M%04d\nkey: %s\ntitle: %s\nstatus: open\ntrust: vetted\nseverity: low\nkind: chore\n---\nwritten by hand\n",
		i, key, title))
}

// TestAddNeverReusesAKeyOnDisk: a person writes SNAG-<next> by hand (named
// for its key, or under any name with the key in its frontmatter) and a
// snag add comes through snagd at once, before the watcher has indexed the
// person's file; repeated, and with other adds running at the same time.
// No key is ever in two files.
func TestAddNeverReusesAKeyOnDisk(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	tasks := filepath.Join(root, ".snag", "tasks")
	ids := 0
	writeHand := func(named bool) string {
		ids++
		next := maxKey(diskKeys(t, tasks)) + 1
		key := "SNAG-" + strconv.Itoa(next)
		name := fmt.Sprintf("%s - by hand %d.md", key, ids)
		if !named {
			name = fmt.Sprintf("by hand %d.md", ids)
		}
		data := handTask(ids, key, fmt.Sprintf("by hand %d", ids))
		if err := os.WriteFile(filepath.Join(tasks, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return key
	}
	add := func(title string) string {
		var got struct {
			Key     string `json:"key"`
			Message string `json:"message"`
		}
		if code := d.do(http.MethodPost, "/tasks", map[string]any{"title": title, "by": "dana"}, &got); code != http.StatusCreated {
			t.Errorf("add %q: HTTP %d: %s", title, code, got.Message)
		}
		return got.Key
	}

	for i := range 20 {
		hand := writeHand(i%2 == 0)
		if got := add(fmt.Sprintf("added %d", i)); got == hand {
			t.Errorf("round %d: snag add handed out %s, which the person's file already has", i, got)
		}
	}

	// Under load: four writers adding all the time while the person keeps
	// writing the next key by hand. The person looks for the next key while
	// no add is in flight (an add that has reserved a key but not written
	// its file yet would make the person, not snag, take a used key); every
	// add after the person's save must leave that key alone.
	var (
		wg       sync.WaitGroup
		inFlight sync.RWMutex
	)
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				inFlight.RLock()
				add(fmt.Sprintf("writer %d add %d", w, i))
				inFlight.RUnlock()
			}
		}()
	}
	for i := range 10 {
		inFlight.Lock()
		writeHand(i%2 == 1)
		inFlight.Unlock()
		add(fmt.Sprintf("after hand %d", i))
	}
	close(stop)
	wg.Wait()

	for n, files := range diskKeys(t, tasks) {
		if len(files) > 1 {
			t.Errorf("SNAG-%d is the key of %d files: %s", n, len(files), strings.Join(files, ", "))
		}
	}
}
