package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// primeCommand is what the SessionStart hook runs.
const primeCommand = "snag prime"

// mergeHook makes the Claude Code settings file at root/file run snag
// prime when a session starts (hooks.SessionStart), keeping every other
// hook and key byte for byte; a file that is not valid JSON is refused and
// left as it is. It returns the edit without making it.
func mergeHook(root, file string) (edit, error) {
	e := edit{rel: filepath.ToSlash(file), path: resolveLink(filepath.Join(root, file)), what: "a SessionStart hook that runs snag prime"}
	b, err := os.ReadFile(e.path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return e, fmt.Errorf("install: read %s: %w", e.rel, err)
	}
	entry := json.RawMessage(`{"hooks":[{"type":"command","command":"` + primeCommand + `"}]}`)
	refuse := func(why error) error {
		return fmt.Errorf("install: %s is not valid JSON, or not the shape snag expects (%v), and was left as it is: fix it and run snag install "+
			"again, or add this to \"hooks\" yourself: \"SessionStart\": [%s]", e.rel, why, entry)
	}
	top := []member{}
	if len(bytes.TrimSpace(b)) > 0 {
		if top, err = decodeObject(b); err != nil {
			return e, refuse(err)
		}
	}
	at, err := find(top, "hooks")
	if err != nil {
		return e, refuse(err)
	}
	hooks := []member{}
	if at >= 0 && string(bytes.TrimSpace(top[at].val)) != "null" {
		if hooks, err = decodeObject(top[at].val); err != nil {
			return e, refuse(fmt.Errorf("hooks: %v", err))
		}
	}
	si, err := find(hooks, "SessionStart")
	if err != nil {
		return e, refuse(err)
	}
	var starts []json.RawMessage
	if si >= 0 && string(bytes.TrimSpace(hooks[si].val)) != "null" {
		if err := json.Unmarshal(hooks[si].val, &starts); err != nil {
			return e, refuse(fmt.Errorf("hooks.SessionStart: %v", err))
		}
	}
	for _, s := range starts {
		if bytes.Contains(s, []byte(`"`+primeCommand+`"`)) {
			return e, nil // there already, as we wrote it or as a person did
		}
	}
	starts = append(starts, entry)
	arr, _ := json.Marshal(starts)
	if si >= 0 {
		hooks[si].val = arr
	} else {
		hooks = append(hooks, member{"SessionStart", arr})
	}
	if at >= 0 {
		top[at].val = encodeObject(hooks)
	} else {
		top = append(top, member{"hooks", encodeObject(hooks)})
	}
	var out bytes.Buffer
	if err := json.Indent(&out, encodeObject(top), "", "  "); err != nil {
		return e, fmt.Errorf("install: %s: %w", e.rel, err)
	}
	out.WriteByte('\n')
	e.outcome, e.data = added, out.Bytes()
	if !exists {
		e.outcome = created
	}
	return e, nil
}

// skillMarker names the files snag writes whole (a skill, Cursor rules):
// a file with it is snag's to replace; one without is a person's, kept.
const skillMarker = "<!-- written by snag install: run it again to update; remove this line to keep your edits -->"

// skillText is the Claude Code skill snag installs.
const skillText = `---
name: snag
description: Work this project's task queue with snag's MCP tools, alongside other agents. Use when picking up, finishing or handing over tasks, or before editing files others may be editing.
---
` + skillMarker + `

` + primeWorkflow + `
Coordination: snag_context names the other agents and what each holds (tasks and files). A claim of files is
refused whole when another agent holds one of them: work elsewhere, ask the holder with snag_handoff, or wait.
Claims last 900 s: claim again to renew. Commits of files another agent claims are refused by the commit guard.
Plans (snag_plan) say what the work is for; a draft you write is a proposal until a person activates it.
`

// cursorRules is the Cursor rule snag installs.
const cursorRules = `---
description: snag, this project's task queue, and how agents share it
alwaysApply: true
---
` + skillMarker + `

` + primeWorkflow

// writeOwned is the edit that puts text in root/file: created when there
// is none, replaced when the file is snag's (it has skillMarker), and
// left alone when a person made it theirs.
func writeOwned(root, file, text, what string) (edit, error) {
	e := edit{rel: filepath.ToSlash(file), path: resolveLink(filepath.Join(root, file)), what: what}
	b, err := os.ReadFile(e.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.outcome, e.data = created, []byte(text)
	case err != nil:
		return e, fmt.Errorf("install: read %s: %w", e.rel, err)
	case string(b) == text || !bytes.Contains(b, []byte(skillMarker)):
		// the same, or a person's own: kept
	default:
		e.outcome, e.data = replaced, []byte(text)
	}
	return e, nil
}
