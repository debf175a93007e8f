package houserules

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cairn-db/cairn"

// layers ranks every package of the module: a package may import only
// packages of a strictly lower rank, so dependencies point down and two
// packages of one rank (the protocols) never import each other. A new
// package must be given its place here.
var layers = map[string]int{
	// Foundations: pure or self-contained, below everything.
	"internal/tstamp":    10,
	"internal/keys":      10,
	"internal/bufpool":   10,
	"internal/md5lanes":  10, // MD5 of many streams at once (AVX-512 lanes)
	"internal/auth":      10,
	"internal/placement": 10,
	"internal/codec":     10,
	"internal/clock":     10,
	"internal/rangedesc": 10,
	"internal/policy":    10, // S3 bucket policies: the access policy language, parsed and evaluated
	"internal/sse":       10, // the envelope of encrypted bodies (S3 server-side encryption)

	// Storage, and the pure rules over it.
	"internal/storage": 20,
	"internal/mvcc":    20,
	"internal/chunk":   20,
	"internal/query":   25, // the query language (CEL) and its plans, over mvcc records

	// The data plane's segments, and a range replica (the Raft group).
	"internal/segment": 30,
	"internal/replica": 30,

	// The range state machine plugs into the replica; the meta service
	// and node-to-node transport sit beside it.
	"internal/kv":        40,
	"internal/meta":      40,
	"internal/transport": 40,

	// Clients of the services below: the timestamp oracle's.
	"internal/tso": 50,

	// The range client: routes range operations to their leaseholders.
	"internal/rangeclient": 60,

	// The transaction coordinator and lock resolver, over the range client.
	"internal/txn": 65,

	// The cluster administration's contract (keys, tokens, membership,
	// routes, the cluster report), beside the object service's.
	"internal/admin": 70,

	// The object service's contract (and, to come, its implementation).
	"internal/object": 70,

	// The cluster manager: this node's part in the cluster (membership,
	// spaces, ranges, repair), serving the object service it builds.
	"internal/cluster": 75,

	// The protocols: each serves the object service, none imports another.
	"internal/wire":    80,
	"internal/s3":      80,
	"internal/api":     80,
	"internal/sqlsrv":  80, // the MySQL protocol (go-mysql-server), read-only
	"internal/console": 80, // the web console (html/template, embedded)

	// The composition root, the public client and the binary.
	"internal/node":             90,
	"client":                    95,
	"cmd/cairn":                 100,
	"cmd/cairn/internal/config": 99,
	"internal/houserules":       100,
	"deploy":                    100, // the image and cluster tests
	"scripts/peerbench":         100, // a benchmark peer driver

	// Test helpers: imported by tests only (see testOnly).
	"internal/testenv": 100,
	"internal/e2es3":   100,
	"internal/history": 100,
}

// testOnly packages hold what tests share; production code never imports
// them.
var testOnly = map[string]bool{
	"internal/testenv": true,
	"internal/e2es3":   true,
	"internal/history": true,
}

// pure packages take no I/O, no clock and no global randomness: time and
// randomness are their inputs, so their tests are deterministic.
var pure = map[string]bool{
	"internal/tstamp":    true,
	"internal/keys":      true,
	"internal/bufpool":   true,
	"internal/mvcc":      true,
	"internal/chunk":     true,
	"internal/query":     true,
	"internal/placement": true,
	"internal/codec":     true,
	"internal/rangedesc": true,
}

// pureForbidden are the imports a pure package may not have.
var pureForbidden = map[string]string{
	"os":                                   "file and process I/O",
	"net":                                  "network I/O",
	"net/http":                             "network I/O",
	"github.com/cockroachdb/pebble/v2":     "the storage engine",
	"github.com/cockroachdb/pebble/v2/vfs": "the disk seam",
}

// clockCalls are the time functions that read the wall clock or start
// timers; a pure package takes the time as an argument instead.
var clockCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTicker": true, "NewTimer": true, "Sleep": true,
}

// randConstructors are the math/rand functions that make a seeded source
// rather than draw from the global one.
var randConstructors = map[string]bool{
	"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
}

type pkg struct {
	rel     string // path within the module ("internal/s3")
	dir     string
	imports []string // non-test imports
	files   []string // non-test Go files
}

func loadPackages(t *testing.T) []pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	var out []pkg
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		bp, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		p := pkg{rel: filepath.ToSlash(rel), dir: path, imports: bp.Imports}
		for _, f := range bp.GoFiles {
			p.files = append(p.files, filepath.Join(path, f))
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out
}

func TestLayers(t *testing.T) {
	for _, p := range loadPackages(t) {
		rank, ok := layers[p.rel]
		if !ok {
			t.Errorf("%s has no place in the layer table: add it to layers in %s with the rank of what it is (the layering in docs/architecture.md)", p.rel, "internal/houserules/rules_test.go")
			continue
		}
		for _, imp := range p.imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if testOnly[dep] {
				t.Errorf("%s imports %s: test helpers are for tests only", p.rel, dep)
				continue
			}
			if dep == "internal/node" && !strings.HasPrefix(p.rel, "cmd/") {
				t.Errorf("%s imports internal/node: only cmd/ may, since node is the composition root that builds everything else", p.rel)
				continue
			}
			dr, ok := layers[dep]
			if ok && dr >= rank {
				t.Errorf("%s (rank %d) imports %s (rank %d): dependencies point down, and packages of one rank do not import each other", p.rel, rank, dep, dr)
			}
		}
	}
}

func TestPurePackages(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !pure[p.rel] {
			continue
		}
		for _, imp := range p.imports {
			if why, bad := pureForbidden[imp]; bad {
				t.Errorf("%s imports %s (%s): a pure package takes no I/O; pass what it needs in", p.rel, imp, why)
			}
		}
		fset := token.NewFileSet()
		for _, file := range p.files {
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			timeName, randName := importName(f, "time"), importName(f, "math/rand")
			if randName == "" {
				randName = importName(f, "math/rand/v2")
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				pos := fset.Position(sel.Pos())
				switch {
				case timeName != "" && x.Name == timeName && clockCalls[sel.Sel.Name]:
					t.Errorf("%s:%d: time.%s in pure package %s: take the time (or a clock) as an input", rel(p, pos.Filename), pos.Line, sel.Sel.Name, p.rel)
				case randName != "" && x.Name == randName && ast.IsExported(sel.Sel.Name) && !randConstructors[sel.Sel.Name] && !isRandType(sel.Sel.Name):
					t.Errorf("%s:%d: rand.%s draws from the global source in pure package %s: take a seeded *rand.Rand", rel(p, pos.Filename), pos.Line, sel.Sel.Name, p.rel)
				}
				return true
			})
		}
	}
}

// clocked packages read the time only through the clock in their options,
// so a test can drive it; the files listed are I/O at the edge, where the
// wall clock is the point.
var clocked = map[string]map[string]string{
	"internal/cluster": {},
	"internal/node": {
		"http.go": "connection deadlines are wall-clock times",
	},
	"internal/replica": {
		"stopwatch.go": "timing stats measure real work",
	},
	"internal/tso": {},
}

// TestClockIsAnInput keeps the clocked packages off time.Now, time.Since
// and time.Until outside the files that are allowed them.
func TestClockIsAnInput(t *testing.T) {
	for _, p := range loadPackages(t) {
		allowed, ok := clocked[p.rel]
		if !ok {
			continue
		}
		eachCall(t, p, []string{"time"}, func(file, fn string, line int) {
			if _, ok := allowed[filepath.Base(file)]; ok {
				return
			}
			if fn == "Now" || fn == "Since" || fn == "Until" {
				t.Errorf("%s:%d: time.%s in %s: read the time from the clock in the options, so tests can drive it", rel(p, file), line, fn, p.rel)
			}
		})
	}
}

// TestGlobalRandomness keeps production code off math/rand's global
// source: a randomized decision takes a seeded source that a test can
// fix and a failure can be rerun from.
func TestGlobalRandomness(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !strings.HasPrefix(p.rel, "internal/") || testOnly[p.rel] {
			continue
		}
		eachCall(t, p, []string{"math/rand", "math/rand/v2"}, func(file, fn string, line int) {
			if !randConstructors[fn] {
				t.Errorf("%s:%d: rand.%s uses math/rand's global source: take a seeded *rand.Rand from the component's options", rel(p, file), line, fn)
			}
		})
	}
}

// TestTypedAtomics keeps shared counters and flags in sync/atomic's types
// (atomic.Int64, atomic.Bool, ...), which cannot be read or written
// without the atomic operations, rather than its functions over plain
// fields.
func TestTypedAtomics(t *testing.T) {
	for _, p := range loadPackages(t) {
		eachCall(t, p, []string{"sync/atomic"}, func(file, fn string, line int) {
			t.Errorf("%s:%d: atomic.%s over a plain field: use sync/atomic's typed values", rel(p, file), line, fn)
		})
	}
}

// eachCall calls found for every call of a package-level function of one
// of the import paths in p's non-test files: the file, the function's name
// and the line.
func eachCall(t *testing.T, p pkg, paths []string, found func(file, fn string, line int)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, file := range p.files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, path := range paths {
			if n := importName(f, path); n != "" {
				names[n] = true
			}
		}
		if len(names) == 0 {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] {
				found(file, sel.Sel.Name, fset.Position(sel.Pos()).Line)
			}
			return true
		})
	}
}

// importName is the name a file gives an import path, or "".
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != path {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return filepath.Base(strings.TrimSuffix(path, "/v2"))
	}
	return ""
}

func isRandType(name string) bool {
	switch name {
	case "Rand", "Source", "Source64", "PCG", "ChaCha8", "Zipf":
		return true
	}
	return false
}

func rel(p pkg, file string) string {
	return filepath.ToSlash(filepath.Join(p.rel, filepath.Base(file)))
}
