package index

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// TestTaskColumnsAreInTheSchema checks that every column the index reads
// or writes for a task is one of the tasks table's.
func TestTaskColumnsAreInTheSchema(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	have := map[string]bool{}
	err = db.withConn(t.Context(), func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT name FROM pragma_table_info('tasks')`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { have[s.ColumnText(0)] = true; return nil },
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rowFields {
		if !have[c.name] {
			t.Errorf("a field of snag.Task is tagged db:%q, which the tasks table does not have: add the column in a migration (schema/NNN_*.sql)", c.name)
		}
	}
	for _, c := range taskColumns {
		if !have[c] {
			t.Errorf("a parsed task writes column %q, which the tasks table does not have: add it in a migration (schema/NNN_*.sql)", c)
		}
	}
}

// TestRowReadsWhatATaskWrites writes the row of a task whose every field
// is set, and reads it back: every db field of snag.Task but the readonly
// ones is set from the file, and reads back as it was written.
func TestRowReadsWhatATaskWrites(t *testing.T) {
	var task queue.Task
	fillAll(reflect.ValueOf(&task).Elem())
	row, err := newTaskRow(&task)
	if err != nil {
		t.Fatal(err)
	}
	want := reflect.ValueOf(row.task)
	for i, f := range reflect.VisibleFields(want.Type()) {
		if c := dbColumn(f); c != "" && want.Field(i).IsZero() {
			t.Errorf("snag.Task.%s (column %s) is empty for a task whose every field is set: work it out from the file in newTaskRow", f.Name, c)
		}
	}

	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got *Row
	err = db.write(ctx, func(conn *sqlite.Conn) error {
		args := append([]any{"tasks/x.md", []byte{}}, stampArgs(taskfs.Stamp{})...)
		if err := exec(conn, insertTaskSQL, append(args, row.args...)...); err != nil {
			return err
		}
		return sqlitex.Execute(conn, `SELECT `+rowColumns+` FROM tasks`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { got = scanRow(s); return nil },
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("the row written was not read back")
	}
	if got.Path != "tasks/x.md" || got.State != snag.StateOK {
		t.Errorf("read back path %q state %q, want tasks/x.md and ok", got.Path, got.State)
	}
	have := reflect.ValueOf(got.Task)
	for i, f := range reflect.VisibleFields(want.Type()) {
		if c := dbColumn(f); c != "" && !reflect.DeepEqual(have.Field(i).Interface(), want.Field(i).Interface()) {
			t.Errorf("snag.Task.%s (column %s) reads back %v, want %v as written", f.Name, c, have.Field(i), want.Field(i))
		}
	}
	if got.sevRank != int64(task.Severity.Rank()) || got.created != task.Created.UnixNano() {
		t.Errorf("read back sev_rank %d created %d, want %d and %d", got.sevRank, got.created, task.Severity.Rank(), task.Created.UnixNano())
	}
}

// dbColumn is the column of a db field of snag.Task that a parsed task
// sets; "" for any other field.
func dbColumn(f reflect.StructField) string {
	for _, c := range rowFields {
		if c.offset == f.Offset && f.Tag.Get("db") != "" {
			if c.readonly {
				return ""
			}
			return c.name
		}
	}
	return ""
}

// fillAll sets every field of v, and of the values it points to, to a value
// that is not zero.
func fillAll(v reflect.Value) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 2, 9, 14, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(3)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillAll(v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(v.Field(i))
			}
		}
	}
}
