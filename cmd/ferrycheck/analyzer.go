package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// Analyzer reports the code that depends on http.DefaultTransport, or
// another http.RoundTripper, being an *http.Transport.
var Analyzer = &analysis.Analyzer{
	Name: "ferrycheck",
	Doc: `report code that needs http.DefaultTransport (or an http.RoundTripper) to be an *http.Transport

ferrycheck finds type assertions and type switches of http.DefaultTransport
or an http.RoundTripper value to *http.Transport, and the fields read or
written through the *http.Transport they produce, in the packages named
and, reported at the import that brings them in, in their dependencies.
For each it says which way of adopting ferry keeps the code working:
transport.Install keeps http.DefaultTransport an *http.Transport (the
assertion holds); transport.InstallDefaultTransport replaces it (the
assertion fails, or panics when unchecked).`,
	Requires:  []*analysis.Analyzer{inspect.Analyzer},
	Run:       run,
	FactTypes: []analysis.Fact{new(transportAssertions)},
}

// transportAssertions is the fact exported for a package: the findings in
// it and in the packages it imports, each "path/file.go:line: message".
type transportAssertions struct{ Findings []string }

func (*transportAssertions) AFact() {}

func (f *transportAssertions) String() string {
	return fmt.Sprintf("%d places need *http.Transport", len(f.Findings))
}

// maxFactFindings bounds a fact's findings, so that a package deep in a
// large graph does not carry thousands of lines.
const maxFactFindings = 200

// The messages end with what each adoption path does to the code.
const (
	msgDefaultUnchecked = "http.DefaultTransport asserted to *http.Transport: holds with transport.Install (safe); " +
		"panics after transport.InstallDefaultTransport"
	msgDefaultChecked = "http.DefaultTransport asserted to *http.Transport: holds with transport.Install (safe); " +
		"fails after transport.InstallDefaultTransport, and this code then skips its configuration"
	msgRoundTripper = "http.RoundTripper asserted to *http.Transport: fails%s when the value is a ferry Transport " +
		"(transport.New or From, or http.DefaultTransport after InstallDefaultTransport); " +
		"transport.Install keeps http.DefaultTransport and clients with a nil Transport on *http.Transport, so it holds for them"
	msgField = "%s field %s of the *http.Transport from the type assertion at %s: works with transport.Install " +
		"(http.DefaultTransport stays an *http.Transport; requests made after one of its settings changed go to net/http, which applies it) (safe); " +
		"not reached when the assertion fails (a ferry Transport, or after transport.InstallDefaultTransport)"
)

func run(pass *analysis.Pass) (any, error) {
	if isStandardLibrary(pass.Pkg.Path()) {
		return nil, nil // net/http's own switches on *Transport are not the user's concern
	}
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	c := &checker{pass: pass, tracked: map[types.Object]string{}, returning: map[types.Object]string{}}

	// Assertions and type switches; the variables they bind and the
	// functions that return their result.
	ins.WithStack([]ast.Node{(*ast.TypeAssertExpr)(nil), (*ast.TypeSwitchStmt)(nil), (*ast.ReturnStmt)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
		if !push {
			return true
		}
		switch n := n.(type) {
		case *ast.TypeAssertExpr:
			if n.Type != nil { // a type switch's x.(type) is handled below
				c.assertion(n, stack)
			}
		case *ast.TypeSwitchStmt:
			c.typeSwitch(n)
		case *ast.ReturnStmt:
			c.returnStmt(n, stack)
		}
		return true
	})
	// Variables set from the functions that return an asserted
	// *http.Transport (resty's Client.Transport, say), in this package.
	if len(c.returning) > 0 {
		ins.WithStack([]ast.Node{(*ast.CallExpr)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
			if push {
				c.call(n.(*ast.CallExpr), stack)
			}
			return true
		})
	}
	// Fields read or written through the tracked variables.
	if len(c.tracked) > 0 {
		ins.WithStack([]ast.Node{(*ast.SelectorExpr)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
			if push {
				sel := n.(*ast.SelectorExpr)
				if id, ok := ast.Unparen(sel.X).(*ast.Ident); ok {
					if line, ok := c.tracked[pass.TypesInfo.Uses[id]]; ok {
						c.field(sel, line, stack)
					}
				}
			}
			return true
		})
	}

	// The dependencies' findings, reported at the imports that bring
	// them in (not those of a package of the same module, reported in
	// place when it is checked too, nor in a generated test main), and
	// this package's fact.
	all := slices.Clone(c.findings)
	for _, f := range pass.Files {
		for _, spec := range f.Imports {
			imp := importedPackage(pass, spec)
			if imp == nil {
				continue
			}
			var fact transportAssertions
			if !pass.ImportPackageFact(imp, &fact) {
				continue
			}
			all = append(all, fact.Findings...)
			if sameModule(pass, imp.Path()) || strings.HasSuffix(pass.Pkg.Path(), ".test") {
				continue
			}
			for _, finding := range fact.Findings {
				pass.Reportf(spec.Pos(), "dependency %s: %s", imp.Path(), finding)
			}
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) > maxFactFindings {
		all = append(all[:maxFactFindings:maxFactFindings], fmt.Sprintf("(and %d more)", len(all)-maxFactFindings))
	}
	if len(all) > 0 {
		pass.ExportPackageFact(&transportAssertions{Findings: all})
	}
	return nil, nil
}

// checker holds one package's state.
type checker struct {
	pass *analysis.Pass
	// tracked maps a variable holding an asserted *http.Transport to
	// where the assertion is ("file.go:line").
	tracked map[types.Object]string
	// returning maps a function of this package that returns an
	// asserted *http.Transport to where the assertion is.
	returning map[types.Object]string
	findings  []string // "path/file.go:line: message", for the fact
}

// report reports a diagnostic and keeps it for the package's fact.
func (c *checker) report(pos token.Pos, msg string) {
	c.pass.Report(analysis.Diagnostic{Pos: pos, Message: msg})
	p := c.pass.Fset.Position(pos)
	c.findings = append(c.findings, fmt.Sprintf("%s/%s:%d: %s", c.pass.Pkg.Path(), filepath.Base(p.Filename), p.Line, msg))
}

// where returns "file.go:line" of pos.
func (c *checker) where(pos token.Pos) string {
	p := c.pass.Fset.Position(pos)
	return fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)
}

// assertion handles x.(*http.Transport).
func (c *checker) assertion(ta *ast.TypeAssertExpr, stack []ast.Node) {
	if !isTransportPtr(c.pass.TypesInfo.TypeOf(ta.Type)) {
		return
	}
	fromDefault := isDefaultTransport(c.pass, ta.X)
	if !fromDefault && !isRoundTripper(c.pass.TypesInfo.TypeOf(ta.X)) {
		return
	}
	parent := parentOf(stack)
	checked := false
	var bound ast.Expr
	switch p := parent.(type) {
	case *ast.AssignStmt:
		if len(p.Rhs) == 1 {
			checked = len(p.Lhs) == 2
			bound = p.Lhs[0]
		}
	case *ast.ValueSpec:
		if len(p.Values) == 1 {
			checked = len(p.Names) == 2
			bound = p.Names[0]
		}
	}
	switch {
	case fromDefault && checked:
		c.report(ta.Pos(), msgDefaultChecked)
	case fromDefault:
		c.report(ta.Pos(), msgDefaultUnchecked)
	case checked:
		c.report(ta.Pos(), fmt.Sprintf(msgRoundTripper, ""))
	default:
		c.report(ta.Pos(), fmt.Sprintf(msgRoundTripper, " (panics: unchecked)"))
	}
	line := c.where(ta.Pos())
	if id, ok := bound.(*ast.Ident); ok {
		if obj := objectOf(c.pass, id); obj != nil {
			c.tracked[obj] = line
		}
	}
	if sel, ok := parent.(*ast.SelectorExpr); ok && sel.X == ta {
		c.field(sel, line, stack[:len(stack)-1])
	}
	if _, ok := parent.(*ast.ReturnStmt); ok {
		if fn := enclosingFunc(c.pass, stack); fn != nil {
			c.returning[fn] = line
		}
	}
}

// typeSwitch handles switch x.(type) { case *http.Transport: ... }.
func (c *checker) typeSwitch(ts *ast.TypeSwitchStmt) {
	var x ast.Expr
	switch a := ts.Assign.(type) {
	case *ast.ExprStmt:
		x = a.X.(*ast.TypeAssertExpr).X
	case *ast.AssignStmt:
		x = a.Rhs[0].(*ast.TypeAssertExpr).X
	}
	fromDefault := isDefaultTransport(c.pass, x)
	if !fromDefault && !isRoundTripper(c.pass.TypesInfo.TypeOf(x)) {
		return
	}
	for _, s := range ts.Body.List {
		cc := s.(*ast.CaseClause)
		for _, e := range cc.List {
			if !isTransportPtr(c.pass.TypesInfo.TypeOf(e)) {
				continue
			}
			if fromDefault {
				c.report(e.Pos(), msgDefaultChecked)
			} else {
				c.report(e.Pos(), fmt.Sprintf(msgRoundTripper, ""))
			}
			// With one type in the case, the switch's variable is an
			// *http.Transport in the clause.
			if obj := c.pass.TypesInfo.Implicits[cc]; obj != nil && len(cc.List) == 1 {
				c.tracked[obj] = c.where(e.Pos())
			}
		}
	}
}

// returnStmt marks the enclosing function as returning an asserted
// *http.Transport when it returns a tracked variable.
func (c *checker) returnStmt(ret *ast.ReturnStmt, stack []ast.Node) {
	for _, r := range ret.Results {
		id, ok := ast.Unparen(r).(*ast.Ident)
		if !ok {
			continue
		}
		if line, ok := c.tracked[c.pass.TypesInfo.Uses[id]]; ok {
			if fn := enclosingFunc(c.pass, stack); fn != nil {
				c.returning[fn] = line
			}
		}
	}
}

// call tracks v := f() (or v, err := f()) where f returns an asserted
// *http.Transport, and reports f().Field.
func (c *checker) call(call *ast.CallExpr, stack []ast.Node) {
	fn := calleeObject(c.pass, call)
	line, ok := c.returning[fn]
	if !ok {
		return
	}
	switch p := parentOf(stack).(type) {
	case *ast.AssignStmt:
		if len(p.Rhs) == 1 {
			if id, ok := p.Lhs[0].(*ast.Ident); ok {
				if obj := objectOf(c.pass, id); obj != nil {
					c.tracked[obj] = line
				}
			}
		}
	case *ast.ValueSpec:
		if len(p.Values) == 1 {
			if obj := objectOf(c.pass, p.Names[0]); obj != nil {
				c.tracked[obj] = line
			}
		}
	case *ast.SelectorExpr:
		if p.X == call {
			c.field(p, line, stack[:len(stack)-1])
		}
	}
}

// field reports sel when it selects a field of the *http.Transport (not a
// method).
func (c *checker) field(sel *ast.SelectorExpr, line string, stack []ast.Node) {
	s := c.pass.TypesInfo.Selections[sel]
	if s == nil || s.Kind() != types.FieldVal {
		return
	}
	verb := "reads"
	switch p := parentOf(stack).(type) {
	case *ast.AssignStmt:
		if slices.Contains(p.Lhs, ast.Expr(sel)) {
			verb = "writes"
		}
	case *ast.IncDecStmt:
		verb = "writes"
	}
	c.report(sel.Sel.Pos(), fmt.Sprintf(msgField, verb, sel.Sel.Name, line))
}

// parentOf returns the node enclosing the last one of stack, skipping
// parentheses.
func parentOf(stack []ast.Node) ast.Node {
	for i := len(stack) - 2; i >= 0; i-- {
		if _, ok := stack[i].(*ast.ParenExpr); !ok {
			return stack[i]
		}
	}
	return nil
}

// enclosingFunc returns the object of the function declaration
// enclosing the stack's last node, or nil inside a function literal.
func enclosingFunc(pass *analysis.Pass, stack []ast.Node) types.Object {
	for i := len(stack) - 1; i >= 0; i-- {
		switch n := stack[i].(type) {
		case *ast.FuncLit:
			return nil
		case *ast.FuncDecl:
			return pass.TypesInfo.Defs[n.Name]
		}
	}
	return nil
}

// calleeObject returns the function or method a call calls statically.
func calleeObject(pass *analysis.Pass, call *ast.CallExpr) types.Object {
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		return pass.TypesInfo.Uses[f]
	case *ast.SelectorExpr:
		return pass.TypesInfo.Uses[f.Sel]
	}
	return nil
}

// objectOf returns the variable an identifier defines or assigns.
func objectOf(pass *analysis.Pass, id *ast.Ident) types.Object {
	if id.Name == "_" {
		return nil
	}
	if obj := pass.TypesInfo.Defs[id]; obj != nil {
		return obj
	}
	return pass.TypesInfo.Uses[id]
}

func importedPackage(pass *analysis.Pass, spec *ast.ImportSpec) *types.Package {
	var obj types.Object
	if spec.Name != nil {
		obj = pass.TypesInfo.Defs[spec.Name]
	} else {
		obj = pass.TypesInfo.Implicits[spec]
	}
	if pn, ok := obj.(*types.PkgName); ok {
		return pn.Imported()
	}
	return nil
}

// isNetHTTP reports whether t is the named type net/http.name.
func isNetHTTP(t types.Type, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "net/http" && n.Obj().Name() == name
}

func isTransportPtr(t types.Type) bool {
	p, ok := types.Unalias(t).(*types.Pointer)
	return ok && isNetHTTP(p.Elem(), "Transport")
}

func isRoundTripper(t types.Type) bool { return t != nil && isNetHTTP(t, "RoundTripper") }

// isDefaultTransport reports whether e is the variable http.DefaultTransport.
func isDefaultTransport(pass *analysis.Pass, e ast.Expr) bool {
	var id *ast.Ident
	switch e := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		id = e.Sel
	case *ast.Ident:
		id = e
	default:
		return false
	}
	v, ok := pass.TypesInfo.Uses[id].(*types.Var)
	return ok && v.Pkg() != nil && v.Pkg().Path() == "net/http" && v.Name() == "DefaultTransport"
}

// sameModule reports whether the package path belongs to the module of
// the package being checked.
func sameModule(pass *analysis.Pass, path string) bool {
	if pass.Module == nil || pass.Module.Path == "" {
		return false
	}
	m := pass.Module.Path
	return path == m || strings.HasPrefix(path, m+"/") || strings.TrimSuffix(path, "_test") == m
}

// isStandardLibrary reports whether path is a standard library package
// (no dot in its first element).
func isStandardLibrary(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
