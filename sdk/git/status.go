package git

import (
	"fmt"
	"strconv"
	"strings"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Status is a repository's state (Client.Status).
type Status struct {
	// Branch is the current branch; "" when HEAD is detached.
	Branch   string
	Detached bool
	// Upstream is the branch's upstream (e.g. origin/main), "" if none;
	// Ahead and Behind count commits against it.
	Upstream      string
	Ahead, Behind int
	// Staged are the changes in the index, Unstaged those in the working
	// tree (a file can be in both).
	Staged, Unstaged []FileChange
	// Untracked and Conflicted are paths.
	Untracked, Conflicted []string
}

// Clean tells whether nothing is staged, changed, untracked or
// conflicted.
func (s *Status) Clean() bool {
	return len(s.Staged)+len(s.Unstaged)+len(s.Untracked)+len(s.Conflicted) == 0
}

// Change is what happened to a file.
type Change string

// The changes.
const (
	Modified    Change = "modified"
	Added       Change = "added"
	Deleted     Change = "deleted"
	Renamed     Change = "renamed"
	Copied      Change = "copied"
	TypeChanged Change = "type_changed"
)

// FileChange is one changed file.
type FileChange struct {
	Path   string
	Change Change
	// From is the former path of a rename or copy.
	From string
}

// Branches are a repository's local branches (Client.Branches).
type Branches struct {
	Branches []string
	// Current is the checked-out branch, "" when HEAD is detached.
	Current string
}

// maxStatusEntries bounds what Status parses, like any output of the
// sandbox (which may hold a hostile repository).
const maxStatusEntries = 1 << 20

// parseGitStatus parses `git status --porcelain=v2 --branch -z`.
func parseGitStatus(out string) (*Status, error) {
	st := &Status{}
	recs := strings.Split(out, "\x00")
	if len(recs) > maxStatusEntries {
		return nil, fmt.Errorf("%w: git status: more than %d entries", rayito.ErrResourceExhausted, maxStatusEntries)
	}
	bad := func(why string) error { return fmt.Errorf("%w: git status: unexpected output (%s)", ErrFailed, why) }
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		if r == "" {
			continue
		}
		switch r[0] {
		case '#':
			if err := st.header(r); err != nil {
				return nil, bad(err.Error())
			}
		case '1', '2':
			// 1 XY sub mH mI mW hH hI path
			// 2 XY sub mH mI mW hH hI Xscore path \0 origPath
			n := 9
			if r[0] == '2' {
				n = 10
			}
			f := strings.SplitN(r, " ", n)
			if len(f) != n || len(f[1]) != 2 {
				return nil, bad("short entry")
			}
			path, from := f[n-1], ""
			if r[0] == '2' {
				if i+1 >= len(recs) || recs[i+1] == "" {
					return nil, bad("rename without its source")
				}
				i++
				from = recs[i]
			}
			if c, ok := gitChange(f[1][0]); ok {
				st.Staged = append(st.Staged, FileChange{Path: path, Change: c, From: from})
			}
			if c, ok := gitChange(f[1][1]); ok {
				st.Unstaged = append(st.Unstaged, FileChange{Path: path, Change: c, From: from})
			}
		case 'u':
			f := strings.SplitN(r, " ", 11)
			if len(f) != 11 {
				return nil, bad("short conflict entry")
			}
			st.Conflicted = append(st.Conflicted, f[10])
		case '?':
			if len(r) < 3 || r[1] != ' ' {
				return nil, bad("short untracked entry")
			}
			st.Untracked = append(st.Untracked, r[2:])
		case '!':
			// ignored files: not asked for
		default:
			return nil, bad("unknown entry")
		}
	}
	return st, nil
}

func (st *Status) header(r string) error {
	key, val, _ := strings.Cut(strings.TrimPrefix(r, "# "), " ")
	switch key {
	case "branch.head":
		if val == "(detached)" {
			st.Detached = true
		} else {
			st.Branch = val
		}
	case "branch.upstream":
		st.Upstream = val
	case "branch.ab":
		a, b, ok := strings.Cut(val, " ")
		if !ok || !strings.HasPrefix(a, "+") || !strings.HasPrefix(b, "-") {
			return fmt.Errorf("branch.ab")
		}
		ahead, err1 := strconv.Atoi(a[1:])
		behind, err2 := strconv.Atoi(b[1:])
		if err1 != nil || err2 != nil || ahead < 0 || behind < 0 {
			return fmt.Errorf("branch.ab")
		}
		st.Ahead, st.Behind = ahead, behind
	}
	return nil
}

func gitChange(c byte) (Change, bool) {
	switch c {
	case 'M':
		return Modified, true
	case 'A':
		return Added, true
	case 'D':
		return Deleted, true
	case 'R':
		return Renamed, true
	case 'C':
		return Copied, true
	case 'T':
		return TypeChanged, true
	}
	return "", false
}

// parseGitBranches parses for-each-ref lines "<HEAD mark>\0<name>".
func parseGitBranches(out string) (*Branches, error) {
	b := &Branches{Branches: []string{}}
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		mark, name, ok := strings.Cut(line, "\x00")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: git branch: unexpected output", ErrFailed)
		}
		b.Branches = append(b.Branches, name)
		if mark == "*" {
			b.Current = name
		}
	}
	return b, nil
}
