package history

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The list-append checker, after Elle (Kingsbury and Alvaro, "Elle:
// Inferring Isolation Anomalies from Experimental Observations", VLDB
// 2020): transactions append unique values to lists kept under keys and
// read whole lists. Every read of a key must be a prefix of one order of
// its appends, which is inferred from the longest read; from that order
// come the dependencies between transactions — ww (T1 appended the value
// right before T2's), wr (T2 read a list ending in T1's value) and rw (T1
// read a list that T2's append extended) — and a cycle in them is an
// anomaly (Adya's G0, G1c, G-single, G2). Reads also show G1a (a value of
// a transaction that failed) and G1b (a value its transaction later
// followed with another append to the same key).

// MopKind is a micro-operation's kind.
type MopKind int

// Micro-operation kinds.
const (
	Append MopKind = iota
	Read
)

// Mop is one micro-operation of a transaction: an append of Value to Key,
// or a read of Key that returned List.
type Mop struct {
	Kind  MopKind
	Key   string
	Value string
	List  []string
}

// Outcome is how a transaction ended.
type Outcome int

// Outcomes. An unknown transaction may or may not have committed.
const (
	Committed Outcome = iota
	Failed
	Unknown
)

// Txn is one recorded transaction.
type Txn struct {
	ID      int
	Mops    []Mop
	Outcome Outcome
}

// TxnLog records transactions from concurrent clients.
type TxnLog struct {
	mu   sync.Mutex
	txns []Txn
}

// Add records a transaction and returns its id.
func (l *TxnLog) Add(mops []Mop, o Outcome) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := len(l.txns)
	l.txns = append(l.txns, Txn{ID: id, Mops: slices.Clone(mops), Outcome: o})
	return id
}

// Txns returns the recorded transactions.
func (l *TxnLog) Txns() []Txn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.txns)
}

// Anomaly names one anomaly found.
type Anomaly struct {
	Kind string // G0, G1a, G1b, G1c, G-single, G2, incompatible-order, duplicate, unknown-value
	Desc string
}

// Report is what CheckListAppend found.
type Report struct {
	Txns, Committed, Edges int
	Anomalies              []Anomaly
}

// Count returns how many anomalies of kind the report holds.
func (r Report) Count(kind string) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d transactions (%d committed), %d dependencies", r.Txns, r.Committed, r.Edges)
	kinds := map[string]int{}
	for _, a := range r.Anomalies {
		kinds[a.Kind]++
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "; %d %s", kinds[k], k)
	}
	for i, a := range r.Anomalies {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ...")
			break
		}
		fmt.Fprintf(&b, "\n  %s: %s", a.Kind, a.Desc)
	}
	return b.String()
}

type edgeKind uint8

const (
	ww edgeKind = 1 << iota
	wr
	rw
)

// CheckListAppend checks a list-append history. Committed transactions
// and unknown ones that a read shows took effect are the graph's nodes;
// failed ones must leave no trace.
func CheckListAppend(txns []Txn) Report {
	rep := Report{Txns: len(txns)}
	add := func(kind, format string, args ...any) {
		rep.Anomalies = append(rep.Anomalies, Anomaly{Kind: kind, Desc: fmt.Sprintf(format, args...)})
	}
	type writer struct {
		txn  int
		last bool // the transaction's last append to the key
	}
	// Who appended each value (values are unique per key).
	appended := map[string]map[string]writer{}
	for _, t := range txns {
		if t.Outcome == Committed {
			rep.Committed++
		}
		lastOf := map[string]int{}
		for i, m := range t.Mops {
			if m.Kind == Append {
				lastOf[m.Key] = i
			}
		}
		for i, m := range t.Mops {
			if m.Kind != Append {
				continue
			}
			if appended[m.Key] == nil {
				appended[m.Key] = map[string]writer{}
			}
			if _, dup := appended[m.Key][m.Value]; dup {
				add("duplicate", "value %q appended to %q twice", m.Value, m.Key)
			}
			appended[m.Key][m.Value] = writer{txn: t.ID, last: lastOf[m.Key] == i}
		}
	}
	// Each key's order: the longest read; every read must be its prefix.
	order := map[string][]string{}
	for _, t := range txns {
		if t.Outcome == Failed {
			continue
		}
		for _, m := range t.Mops {
			if m.Kind == Read && len(m.List) > len(order[m.Key]) {
				order[m.Key] = m.List
			}
		}
	}
	seen := map[int]bool{} // transactions a read shows took effect
	for _, t := range txns {
		if t.Outcome == Failed {
			continue
		}
		for _, m := range t.Mops {
			if m.Kind != Read {
				continue
			}
			long := order[m.Key]
			if len(m.List) > len(long) || !slices.Equal(long[:len(m.List)], m.List) {
				add("incompatible-order", "txn %d read %q = %v, not a prefix of %v", t.ID, m.Key, m.List, long)
			}
			dups := map[string]bool{}
			for _, v := range m.List {
				if dups[v] {
					add("duplicate", "txn %d read %q = %v: %q twice", t.ID, m.Key, m.List, v)
				}
				dups[v] = true
				w, ok := appended[m.Key][v]
				switch {
				case !ok:
					add("unknown-value", "txn %d read %q = %v: nobody appended %q", t.ID, m.Key, m.List, v)
				case txns[w.txn].Outcome == Failed:
					add("G1a", "txn %d read %q from txn %d, which failed", t.ID, v, w.txn)
				default:
					seen[w.txn] = true
				}
			}
			if n := len(m.List); n > 0 {
				if w, ok := appended[m.Key][m.List[n-1]]; ok && !w.last && w.txn != t.ID {
					add("G1b", "txn %d read %q = %v, ending in an intermediate append of txn %d", t.ID, m.Key, m.List, w.txn)
				}
			}
		}
	}
	in := func(id int) bool { return txns[id].Outcome == Committed || txns[id].Outcome == Unknown && seen[id] }
	// The dependency graph.
	g := map[int]map[int]edgeKind{}
	edge := func(a, b int, k edgeKind) {
		if a == b || !in(a) || !in(b) {
			return
		}
		if g[a] == nil {
			g[a] = map[int]edgeKind{}
		}
		if g[a][b]&k == 0 {
			rep.Edges++
		}
		g[a][b] |= k
	}
	for key, long := range order {
		for i := 1; i < len(long); i++ {
			a, okA := appended[key][long[i-1]]
			b, okB := appended[key][long[i]]
			if okA && okB {
				edge(a.txn, b.txn, ww)
			}
		}
	}
	for _, t := range txns {
		if !in(t.ID) {
			continue
		}
		for _, m := range t.Mops {
			if m.Kind != Read {
				continue
			}
			long := order[m.Key]
			if n := len(m.List); n > 0 {
				if w, ok := appended[m.Key][m.List[n-1]]; ok {
					edge(w.txn, t.ID, wr)
				}
			}
			// The append that extended what this read saw (unless it is
			// the same transaction's next one: a G1b, reported above).
			if n := len(m.List); n < len(long) && slices.Equal(long[:n], m.List) {
				w, ok := appended[m.Key][long[n]]
				if prev, pok := appended[m.Key][lastOf(m.List)]; ok && (!pok || prev.txn != w.txn) {
					edge(t.ID, w.txn, rw)
				}
			}
		}
	}
	rep.Anomalies = append(rep.Anomalies, cycles(g)...)
	return rep
}

// cycles finds the dependency cycles of g, one anomaly per strongly
// connected component, named by the fewest kinds of edge that close a
// cycle in it: G0 if ww edges alone do, else G1c if ww and wr do, else
// G-single if one rw edge with ww/wr edges does, else G2.
func cycles(g map[int]map[int]edgeKind) []Anomaly {
	var out []Anomaly
	for _, scc := range sccs(g, ww|wr|rw) {
		members := map[int]bool{}
		for _, v := range scc {
			members[v] = true
		}
		sub := func(mask edgeKind) map[int]map[int]edgeKind {
			s := map[int]map[int]edgeKind{}
			for _, a := range scc {
				for b, k := range g[a] {
					if members[b] && k&mask != 0 {
						if s[a] == nil {
							s[a] = map[int]edgeKind{}
						}
						s[a][b] = k & mask
					}
				}
			}
			return s
		}
		switch {
		case len(sccs(sub(ww), ww)) > 0:
			out = append(out, Anomaly{"G0", fmt.Sprintf("write cycle among txns %v", scc)})
		case len(sccs(sub(ww|wr), ww|wr)) > 0:
			out = append(out, Anomaly{"G1c", fmt.Sprintf("write/read cycle among txns %v", scc)})
		default:
			// G-single: an rw edge a->b with a path b->a of ww/wr edges.
			dep := sub(ww | wr)
			single := false
			for _, a := range scc {
				for b, k := range g[a] {
					if members[b] && k&rw != 0 && reaches(dep, b, a) {
						out = append(out, Anomaly{"G-single", fmt.Sprintf("txn %d -rw-> txn %d, which reaches it by ww/wr (txns %v)", a, b, scc)})
						single = true
						break
					}
				}
				if single {
					break
				}
			}
			if !single {
				out = append(out, Anomaly{"G2", fmt.Sprintf("cycle with anti-dependencies among txns %v", scc)})
			}
		}
	}
	return out
}

func reaches(g map[int]map[int]edgeKind, from, to int) bool {
	seen := map[int]bool{from: true}
	stack := []int{from}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if v == to {
			return true
		}
		for w := range g[v] {
			if !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	return false
}

// sccs returns the strongly connected components of g (over edges of
// mask) that hold a cycle: more than one vertex (g has no self loops).
// Tarjan's algorithm, iterative.
func sccs(g map[int]map[int]edgeKind, mask edgeKind) [][]int {
	index, low := map[int]int{}, map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var out [][]int
	next := 0
	var vs []int
	for v := range g {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	type frame struct {
		v    int
		succ []int
		i    int
	}
	succs := func(v int) []int {
		var s []int
		for w, k := range g[v] {
			if k&mask != 0 {
				s = append(s, w)
			}
		}
		sort.Ints(s)
		return s
	}
	for _, root := range vs {
		if _, ok := index[root]; ok {
			continue
		}
		call := []frame{{v: root, succ: succs(root)}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.i < len(f.succ) {
				w := f.succ[f.i]
				f.i++
				if _, ok := index[w]; !ok {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w, succ: succs(w)})
				} else if onStack[w] {
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				if len(comp) > 1 {
					sort.Ints(comp)
					out = append(out, comp)
				}
			}
		}
	}
	return out
}

func lastOf(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}
