//go:build linux

package netcfg

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeNFT is an in-memory nftables: calls are queued and Flush applies
// them atomically (all or nothing), like the kernel's batch.
type fakeNFT struct {
	mu      sync.Mutex
	queue   []func(*fakeRuleset) error
	state   *fakeRuleset
	flushes int // Flush calls that sent something
	sent    int // messages sent
	// failFlush makes the next Flush calls fail (counts down).
	failFlush int
	// afterFlush runs after each successful Flush (to simulate drift).
	afterFlush func(*fakeRuleset)
}

type fakeTable struct {
	chains []*nftables.Chain
	rules  map[string][]*nftables.Rule
	sets   map[string]*fakeSet
}

type fakeSet struct {
	set   *nftables.Set
	elems []nftables.SetElement
}

type fakeRuleset struct{ tables map[string]*fakeTable }

func (rs *fakeRuleset) clone() *fakeRuleset {
	out := &fakeRuleset{tables: map[string]*fakeTable{}}
	for k, t := range rs.tables {
		nt := &fakeTable{chains: slices.Clone(t.chains), rules: map[string][]*nftables.Rule{}, sets: map[string]*fakeSet{}}
		for c, r := range t.rules {
			nt.rules[c] = slices.Clone(r)
		}
		for n, s := range t.sets {
			nt.sets[n] = &fakeSet{set: s.set, elems: slices.Clone(s.elems)}
		}
		out.tables[k] = nt
	}
	return out
}

func newFakeNFT() *fakeNFT { return &fakeNFT{state: &fakeRuleset{tables: map[string]*fakeTable{}}} }

func (f *fakeNFT) enqueue(op func(*fakeRuleset) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, op)
}

func (f *fakeNFT) table(rs *fakeRuleset, name string) (*fakeTable, error) {
	t := rs.tables[name]
	if t == nil {
		return nil, unix.ENOENT
	}
	return t, nil
}

func (f *fakeNFT) AddTable(t *nftables.Table) *nftables.Table {
	f.enqueue(func(rs *fakeRuleset) error {
		if rs.tables[t.Name] == nil {
			rs.tables[t.Name] = &fakeTable{rules: map[string][]*nftables.Rule{}, sets: map[string]*fakeSet{}}
		}
		return nil
	})
	return t
}

func (f *fakeNFT) CreateTable(t *nftables.Table) *nftables.Table {
	f.enqueue(func(rs *fakeRuleset) error {
		if rs.tables[t.Name] != nil {
			return unix.EEXIST
		}
		rs.tables[t.Name] = &fakeTable{rules: map[string][]*nftables.Rule{}, sets: map[string]*fakeSet{}}
		return nil
	})
	return t
}

func (f *fakeNFT) DelTable(t *nftables.Table) {
	f.enqueue(func(rs *fakeRuleset) error {
		if rs.tables[t.Name] == nil {
			return unix.ENOENT
		}
		delete(rs.tables, t.Name)
		return nil
	})
}

func (f *fakeNFT) AddChain(c *nftables.Chain) *nftables.Chain {
	f.enqueue(func(rs *fakeRuleset) error {
		t, err := f.table(rs, c.Table.Name)
		if err != nil {
			return err
		}
		t.chains = append(t.chains, c)
		return nil
	})
	return c
}

func (f *fakeNFT) AddSet(s *nftables.Set, elems []nftables.SetElement) error {
	f.enqueue(func(rs *fakeRuleset) error {
		t, err := f.table(rs, s.Table.Name)
		if err != nil {
			return err
		}
		t.sets[s.Name] = &fakeSet{set: s, elems: slices.Clone(elems)}
		return nil
	})
	return nil
}

func (f *fakeNFT) AddRule(r *nftables.Rule) *nftables.Rule {
	f.enqueue(func(rs *fakeRuleset) error {
		t, err := f.table(rs, r.Table.Name)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(t.chains, func(c *nftables.Chain) bool { return c.Name == r.Chain.Name }) {
			return unix.ENOENT
		}
		t.rules[r.Chain.Name] = append(t.rules[r.Chain.Name], r)
		return nil
	})
	return r
}

var errFakeFlush = errors.New("fake: flush failed")

func (f *fakeNFT) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queue
	f.queue = nil
	if len(q) == 0 {
		return nil
	}
	f.flushes++
	f.sent += len(q)
	if f.failFlush > 0 {
		f.failFlush--
		return errFakeFlush
	}
	next := f.state.clone()
	for i, op := range q {
		if err := op(next); err != nil {
			return fmt.Errorf("fake: message %d: %w", i, err)
		}
	}
	f.state = next
	if f.afterFlush != nil {
		f.afterFlush(f.state)
	}
	return nil
}

func (f *fakeNFT) ListTablesOfFamily(nftables.TableFamily) ([]*nftables.Table, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*nftables.Table
	for name := range f.state.tables {
		out = append(out, &nftables.Table{Name: name, Family: nftables.TableFamilyINet})
	}
	return out, nil
}

func (f *fakeNFT) ListChainsOfTableFamily(nftables.TableFamily) ([]*nftables.Chain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*nftables.Chain
	for _, t := range f.state.tables {
		out = append(out, t.chains...)
	}
	return out, nil
}

func (f *fakeNFT) GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.table(f.state, t.Name)
	if err != nil {
		return nil, err
	}
	return slices.Clone(ft.rules[c.Name]), nil
}

func (f *fakeNFT) GetSets(t *nftables.Table) ([]*nftables.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.table(f.state, t.Name)
	if err != nil {
		return nil, err
	}
	var out []*nftables.Set
	for _, s := range ft.sets {
		out = append(out, s.set)
	}
	return out, nil
}

func (f *fakeNFT) GetSetElements(s *nftables.Set) ([]nftables.SetElement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.table(f.state, s.Table.Name)
	if err != nil {
		return nil, err
	}
	fs := ft.sets[s.Name]
	if fs == nil {
		return nil, unix.ENOENT
	}
	return slices.Clone(fs.elems), nil
}

// rules returns the installed rules of a chain of our table.
func (f *fakeNFT) rules(chain string) []*nftables.Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state.tables[TableName]
	if t == nil {
		return nil
	}
	return t.rules[chain]
}

func (f *fakeNFT) elems(set string) []nftables.SetElement {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state.tables[TableName]
	if t == nil || t.sets[set] == nil {
		return nil
	}
	return t.sets[set].elems
}

// fakeRules is an in-memory policy routing rule list.
type fakeRules struct {
	mu      sync.Mutex
	rules   []netlink.Rule
	listErr error
	adds    int
}

func (f *fakeRules) RuleList(family int) ([]netlink.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []netlink.Rule
	for _, r := range f.rules {
		if r.Family == family {
			// Listing does not report the action (as netlink v1.3.1).
			r.Type = 0
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeRules) RuleAdd(r *netlink.Rule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds++
	c := *r
	if c.Table < 0 {
		c.Table = 0
	}
	f.rules = append(f.rules, c)
	return nil
}

func (f *fakeRules) RuleDel(r *netlink.Rule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, g := range f.rules {
		if sameRule(g, r) {
			f.rules = slices.Delete(f.rules, i, i+1)
			return nil
		}
	}
	return unix.ENOENT
}

var errEPERM = unix.EPERM
