package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxCognitive bounds a function's cognitive complexity: past it, a
// reader holds too many branches at once.
const maxCognitive = 40

// TestFunctionsStaySimple holds every function (tests aside) to
// maxCognitive. (The 25 over it when the bound came in were split.)
func TestFunctionsStaySimple(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, name := range p.GoFiles {
			fs := token.NewFileSet()
			f, err := parser.ParseFile(fs, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := cognitive(fd.Body); n > maxCognitive {
					t.Errorf("%s.%s (%s) has a cognitive complexity of %d, over %d: split it into functions named for what they do",
						rel, funcName(fd), name, n, maxCognitive)
				}
			}
		}
	}
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// cognitive is the cognitive complexity of a function's body, as
// G. Ann Campbell's paper counts it: one for each if, else if, else,
// switch, select, loop, labelled jump and run of like boolean operators,
// and for a structure one more for each structure it is nested in (a
// function literal nests what it holds).
func cognitive(body *ast.BlockStmt) int {
	total := 0
	var walk func(n ast.Node, nest int)
	children := func(n ast.Node, nest int) {
		ast.Inspect(n, func(x ast.Node) bool {
			if x == n {
				return true
			}
			switch x.(type) {
			case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt,
				*ast.FuncLit, *ast.BranchStmt, *ast.BinaryExpr:
				walk(x, nest)
				return false
			}
			return true
		})
	}
	walk = func(n ast.Node, nest int) {
		switch s := n.(type) {
		case *ast.IfStmt:
			total += 1 + nest
			if s.Init != nil {
				children(s.Init, nest)
			}
			walk(s.Cond, nest)
			children(s.Body, nest+1)
			switch e := s.Else.(type) {
			case *ast.IfStmt:
				total -= nest // an else if counts one, without its nesting
				walk(e, nest)
			case *ast.BlockStmt:
				total++
				children(e, nest+1)
			}
		case *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
			total += 1 + nest
			children(n, nest+1)
		case *ast.FuncLit:
			children(s.Body, nest+1)
		case *ast.BranchStmt:
			if s.Label != nil {
				total++
			}
		case *ast.BinaryExpr:
			if s.Op != token.LAND && s.Op != token.LOR {
				children(n, nest)
				return
			}
			total += boolRuns(s)
			for _, leaf := range boolLeaves(s) {
				children(leaf, nest)
			}
		default:
			children(n, nest)
		}
	}
	children(body, 0)
	return total
}

// boolLeaves are the operands of a run of boolean operators that are not
// themselves && or ||.
func boolLeaves(e ast.Expr) []ast.Expr {
	if p, ok := e.(*ast.ParenExpr); ok {
		return boolLeaves(p.X)
	}
	if b, ok := e.(*ast.BinaryExpr); ok && (b.Op == token.LAND || b.Op == token.LOR) {
		return append(boolLeaves(b.X), boolLeaves(b.Y)...)
	}
	return []ast.Expr{e}
}

// boolRuns counts the runs of like operators in a boolean expression:
// a && b && c is one, a && b || c two.
func boolRuns(e ast.Expr) int {
	var ops []token.Token
	var flatten func(e ast.Expr)
	flatten = func(e ast.Expr) {
		if p, ok := e.(*ast.ParenExpr); ok {
			flatten(p.X)
			return
		}
		b, ok := e.(*ast.BinaryExpr)
		if !ok || (b.Op != token.LAND && b.Op != token.LOR) {
			return
		}
		flatten(b.X)
		ops = append(ops, b.Op)
		flatten(b.Y)
	}
	flatten(e)
	n := 0
	for i, op := range ops {
		if i == 0 || op != ops[i-1] {
			n++
		}
	}
	return n
}
