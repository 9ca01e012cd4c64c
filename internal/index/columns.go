package index

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"zombiezen.com/go/sqlite"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// This file declares the tasks table's row once. The columns lists show
// are the fields of snag.Task that carry a db tag (see package snag): the
// list of them is built here once, from the tags, and every read of a row
// (rowColumns, scanRow) and every write of a parsed task (taskColumns,
// newTaskRow) goes through it. A new column in snag list is then its
// migration, its tagged field in snag.Task, the line of newTaskRow that
// works it out from the task file, and the CLI's column; the wire mapping
// (Row.Wire) is the embedded snag.Task as it is.

// Row is one task as lists show it: the columns a compact table needs
// (snag.Task, which the API carries as it is), with what the index's reads
// keep beside them. HeldIn and HeldOn are never stored: the engine's reads
// set them.
type Row struct {
	snag.Task

	n        int64
	created  int64
	sevRank  int64
	hasDeps  bool
	hasValid bool // the row has task data (parsed now or before)
}

// column is one column of the tasks table that a field of snag.Task
// holds.
type column struct {
	name     string       // the SQL column
	offset   uintptr      // of the field in snag.Task
	kind     reflect.Kind // String, Int or Bool: the field's type is one of those, or a type of one
	readonly bool         // kept by the index (db:",readonly"): a parsed task does not set it
}

// rowFields are the columns of snag.Task's db fields: the strings, then
// the ints, then the bools, each in the order of the fields. The fields
// are read and written through their offsets, so that a row's scan costs
// what a scan written out by hand does (scanRow reads each kind in a loop
// of its own): reflection runs once, here, and checks the types that make
// the offsets safe to use.
var rowFields = taskFields()

// The first rowTexts of rowFields are strings, the next rowInts ints.
var rowTexts, rowInts = kindCount(reflect.String), kindCount(reflect.Int)

func kindCount(k reflect.Kind) int {
	n := 0
	for _, c := range rowFields {
		if c.kind == k {
			n++
		}
	}
	return n
}

func taskFields() []column {
	ty := reflect.TypeFor[snag.Task]()
	var cols []column
	for i := range ty.NumField() {
		f := ty.Field(i)
		tag, ok := f.Tag.Lookup("db")
		if !ok {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		k := f.Type.Kind()
		if k != reflect.String && k != reflect.Int && k != reflect.Bool || name == "" || opt != "" && opt != "readonly" {
			panic(fmt.Sprintf("index: snag.Task.%s: db tag %q on a %s: want a column name, optionally \",readonly\", on a string, int or bool", f.Name, tag, f.Type))
		}
		cols = append(cols, column{name: name, offset: f.Offset, kind: k, readonly: opt == "readonly"})
	}
	rank := map[reflect.Kind]int{reflect.String: 0, reflect.Int: 1, reflect.Bool: 2}
	slices.SortStableFunc(cols, func(a, b column) int { return rank[a.kind] - rank[b.kind] })
	return cols
}

// field is where c's field is in t.
func (c *column) field(t *snag.Task) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(t), c.offset) }

// arg is c's field of t as exec binds it.
func (c *column) arg(t *snag.Task) any {
	switch p := c.field(t); c.kind {
	case reflect.String:
		return *(*string)(p)
	case reflect.Int:
		return int64(*(*int)(p))
	default:
		return boolInt(*(*bool)(p))
	}
}

// rowColumns are the columns scanRow reads, in its order: the db fields of
// snag.Task, then the row number, what orders the row in the queue, and
// whether it has dependencies. A query's own columns after them start at
// rowWidth.
var rowColumns = func() string {
	var b strings.Builder
	for _, c := range rowFields {
		b.WriteString("tasks." + c.name + ", ")
	}
	return b.String() + `tasks.n, tasks.created, tasks.sev_rank, EXISTS (SELECT 1 FROM deps d WHERE d.task_n = tasks.n)`
}()

// rowWidth is the number of rowColumns.
var rowWidth = len(rowFields) + 4

func scanRow(s *sqlite.Stmt) *Row {
	r := &Row{}
	i := 0
	for ; i < rowTexts; i++ {
		*(*string)(rowFields[i].field(&r.Task)) = s.ColumnText(i)
	}
	for ; i < rowTexts+rowInts; i++ {
		*(*int)(rowFields[i].field(&r.Task)) = s.ColumnInt(i)
	}
	for ; i < len(rowFields); i++ {
		*(*bool)(rowFields[i].field(&r.Task)) = s.ColumnBool(i)
	}
	k := len(rowFields)
	r.n, r.created, r.sevRank, r.hasDeps = s.ColumnInt64(k), s.ColumnInt64(k+1), s.ColumnInt64(k+2), s.ColumnBool(k+3)
	r.hasValid = r.ID != ""
	return r
}

// taskRow is what a parsed task puts in its row beside the file's facts.
type taskRow struct {
	task snag.Task // the columns lists show; its readonly fields are unset
	// The columns the full-text index holds besides the title.
	body, console, files string
	deps                 []string
	args                 []any // in the order of taskColumns
}

// taskColumns are the columns a parsed task sets, in the order of
// taskRow.args: snag.Task's db fields but the readonly ones, then those
// that lists do not show (taskRest).
var taskColumns = func() []string {
	var cols []string
	for _, c := range rowFields {
		if !c.readonly {
			cols = append(cols, c.name)
		}
	}
	return append(cols, "key_num", "sev_rank", "created", "updated", "terminal", "console", "files", "data", "body")
}()

// textColumn reports whether the column is one the full-text index holds.
func textColumn(name string) bool {
	return name == "title" || name == "body" || name == "console" || name == "files"
}

func newTaskRow(t *queue.Task) (*taskRow, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var files, console []string
	for _, f := range t.SuspectFiles {
		files = append(files, f.Path)
	}
	first := ""
	if len(t.SuspectFiles) > 0 {
		first = t.SuspectFiles[0].String()
	}
	if t.Capture != nil {
		console = t.Capture.ConsoleErrors
	}
	row := &taskRow{
		// The columns lists show, as the file gives them: a new column's
		// value is worked out here.
		task: snag.Task{ID: t.ID, Key: t.Key, Title: t.Title, Status: t.Status, Trust: t.Trust, Severity: t.Severity,
			Kind: t.Kind, Wave: t.Wave, Plan: t.Plan, Assignee: t.Assignee, File: first},
		body: string(t.Body), console: strings.Join(console, "\n"), files: strings.Join(files, "\n"),
	}
	row.args = make([]any, 0, len(taskColumns))
	for i := range rowFields {
		if c := &rowFields[i]; !c.readonly {
			row.args = append(row.args, c.arg(&row.task))
		}
	}
	row.args = append(row.args, int64(t.Num()), int64(t.Severity.Rank()), unixNano(t.Created), unixNano(t.Updated),
		boolInt(t.Status.Terminal()), row.console, row.files, string(data), row.body)
	for _, d := range t.DependsOn {
		ref, err := queue.ParseRef(d)
		if err != nil {
			continue // Parse already refused these; keep going if it ever lets one by
		}
		row.deps = append(row.deps, ref.String())
	}
	return row, nil
}

var (
	insertTaskSQL = `INSERT INTO tasks (path, sha256, size, mtime, ino, ctime, ` + strings.Join(taskColumns, ", ") +
		`) VALUES (?, ?, ?, ?, ?, ?` + strings.Repeat(", ?", len(taskColumns)) + `)`
	updateTaskSQL = `UPDATE tasks SET path = ?, sha256 = ?, size = ?, mtime = ?, ino = ?, ctime = ?, ` +
		strings.Join(taskColumns, " = ?, ") + ` = ?, state = 'ok', error = '', error_line = 0, stale = 0 WHERE n = ?`
)

// A rewrite by snag itself (a claim, a release, a resolve) changes a few
// frontmatter scalars and never the text the full-text index holds, the
// id, the alias or the dependencies. Its row is then updated in place
// through updateFactsSQL, which leaves the text columns out of its SET: the
// full-text update trigger does not fire, so the transaction does not
// tokenise the body again and write a new full-text segment, and the
// duplicate flags, which depend on ids and aliases alone, stay right.
var updateFactsSQL = func() string {
	cols := []string{"path", "sha256", "size", "mtime", "ino", "ctime"}
	for _, c := range taskColumns {
		if !textColumn(c) {
			cols = append(cols, c)
		}
	}
	return `UPDATE tasks SET ` + strings.Join(cols, " = ?, ") +
		` = ?, state = 'ok', error = '', error_line = 0, stale = 0 WHERE n = ?`
}()

// factsOf returns a task row's values less its text columns, in the order
// updateFactsSQL wants them.
func factsOf(args []any) []any {
	out := make([]any, 0, len(args))
	for i, a := range args {
		if !textColumn(taskColumns[i]) {
			out = append(out, a)
		}
	}
	return out
}
