package daemon

import (
	"errors"
	"syscall"
	"testing"
)

func TestParseFailpoints(t *testing.T) {
	fps, err := parseFailpoints("claim:renamed@3, add:temp-written=enospc,*:*=sleep:1ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(fps.points) != 3 || fps.points[0].nth != 3 || fps.points[1].action != "enospc" || fps.points[2].action != "sleep" {
		t.Fatalf("parsed %+v %+v %+v", fps.points[0], fps.points[1], fps.points[2])
	}
	if err := fps.hit("add", "temp-written"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("add:temp-written: %v; want ENOSPC", err)
	}
	if err := fps.hit("add", "temp-written"); err != nil {
		t.Errorf("second hit: %v; a failpoint fires once", err)
	}
	for _, bad := range []string{"claim", "claim:renamed@0", "claim:renamed=explode", ":x", "claim:renamed=sleep:x"} {
		if _, err := parseFailpoints(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if fps, err := parseFailpoints(""); fps != nil || err != nil {
		t.Errorf("empty: %v %v", fps, err)
	}
	var none *failpoints
	if err := none.hit("claim", "renamed"); err != nil {
		t.Error(err)
	}
}
