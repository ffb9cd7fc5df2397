package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxExported is a ratchet on the public API: the exported identifiers
// (top-level names, methods of exported types and the methods reached
// through aliases of internal types, each once however many build-tagged
// files declare it) across the packages a user can import. Lower it as
// names move under internal/ (issue 25 brought it from 210 to 142,
// under its goal of about 150; decode.SetTransform and TransformFlags,
// the transforms for programs that embed the decoder, and
// decode.ModalityAudio made it 145).
const maxExported = 145

// TestPublicAPISize counts the exported identifiers of every importable
// package (not internal/, not a command, not a test helper) and prints
// the count, so that the public line is measured, not asserted.
func TestPublicAPISize(t *testing.T) {
	root := filepath.Join("..", "..")
	names := map[string]map[string]bool{} // package → its exported names
	counts := map[string]int{}
	fset := token.NewFileSet()
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "internal" || base == "cmd") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil || f.Name.Name == "main" || strings.HasSuffix(f.Name.Name, "test") {
			return nil
		}
		pkg := filepath.Dir(rel)
		if names[pkg] == nil {
			names[pkg] = map[string]bool{}
		}
		for _, n := range exported(f) { // once, however many build-tagged files declare it
			names[pkg][n] = true
		}
		for _, n := range aliasMethods(t, root, f) {
			names[pkg][n] = true
		}
		counts[pkg] = len(names[pkg])
		return nil
	})
	var pkgs []string
	total := 0
	for p, n := range counts {
		pkgs = append(pkgs, p)
		total += n
	}
	sort.Slice(pkgs, func(i, j int) bool { return counts[pkgs[i]] > counts[pkgs[j]] })
	for _, p := range pkgs {
		t.Logf("%5d %s", counts[p], p)
		if testing.Verbose() && os.Getenv("API_NAMES") != "" {
			t.Logf("      %s", strings.Join(slices.Sorted(maps.Keys(names[p])), " "))
		}
	}
	t.Logf("%5d exported identifiers in %d public packages (at most %d)", total, len(pkgs), maxExported)
	if total > maxExported {
		t.Errorf("%d exported identifiers, more than the ratchet's %d: keep new names unexported or under internal/", total, maxExported)
	}
}

// exported lists f's exported top-level names and the exported methods
// of its exported types ("World.Test").
func exported(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				out = append(out, d.Name.Name)
				continue
			}
			if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
				out = append(out, recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, name := range s.Names {
						if name.IsExported() {
							out = append(out, name.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// aliasMethods lists the exported methods a user reaches through f's
// exported aliases of the module's internal types ("Kind.String" for
// `type Kind = step.Kind`): they are the public package's API as much as
// its own methods are.
func aliasMethods(t *testing.T, root string, f *ast.File) []string {
	const module = "github.com/datahelix/datahelix/"
	imports := map[string]string{} // name in f -> directory under root
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		if !strings.HasPrefix(path, module+"internal/") {
			continue
		}
		name := filepath.Base(path)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = filepath.Join(root, strings.TrimPrefix(path, module))
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok || !ts.Assign.IsValid() || !ts.Name.IsExported() {
				continue
			}
			sel, ok := ts.Type.(*ast.SelectorExpr)
			if !ok {
				continue
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || imports[pkg.Name] == "" {
				continue
			}
			for _, m := range methodsOf(t, imports[pkg.Name], sel.Sel.Name) {
				out = append(out, ts.Name.Name+"."+m)
			}
		}
	}
	return out
}

// methodsOf lists the exported methods of type name declared in the
// package in dir.
func methodsOf(t *testing.T, dir, name string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.IsExported() && recvName(fd.Recv.List[0].Type) == name {
				out = append(out, fd.Name.Name)
			}
		}
	}
	return out
}

// recvName is the name of a method's receiver type.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
