package cliutil

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Candidate is a sandbox an id prefix can name.
type Candidate struct {
	ID    string
	State string
}

// Candidates lists the sandboxes an id prefix is resolved against.
type Candidates func(context.Context) ([]Candidate, error)

// PlatformCandidates lists every sandbox of the platform opts reach,
// ended ones included (an ended sandbox can still be described).
func PlatformCandidates(opts []rayito.Option) Candidates {
	return func(ctx context.Context) ([]Candidate, error) {
		infos, err := rayito.List(ctx, opts...)
		if err != nil {
			return nil, err
		}
		out := make([]Candidate, len(infos))
		for i, in := range infos {
			out[i] = Candidate{ID: in.ID, State: in.State}
		}
		return out, nil
	}
}

// idPrefix is "microvm-" and a UUID.
const (
	idPrefix    = "microvm-"
	uuidPattern = "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh"
)

var bareUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// maxShownMatches bounds the candidates an ambiguous prefix lists.
const maxShownMatches = 3

// AmbiguousIDError: an id prefix names more than one sandbox.
type AmbiguousIDError struct {
	Prefix  string
	Matches []Candidate
}

func (e *AmbiguousIDError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sandbox id %s matches %d sandboxes: ", e.Prefix, len(e.Matches))
	for i, m := range e.Matches[:min(len(e.Matches), maxShownMatches)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.ID)
		if m.State != "" {
			b.WriteString(" (" + m.State + ")")
		}
	}
	if n := len(e.Matches) - maxShownMatches; n > 0 {
		fmt.Fprintf(&b, " and %d more", n)
	}
	b.WriteString("; give more of the id")
	return b.String()
}

// isIDPrefix reports whether s can begin a sandbox id: a prefix of
// "microvm-<uuid>", or of the UUID alone.
func isIDPrefix(s string) bool {
	return s != "" && (fits(s, idPrefix+uuidPattern) || fits(s, uuidPattern))
}

// fits reports whether s is a prefix of pattern, whose 'h' stands for a
// hex digit and every other byte for itself.
func fits(s, pattern string) bool {
	if len(s) > len(pattern) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if pattern[i] == 'h' && !isHex(s[i]) || pattern[i] != 'h' && s[i] != pattern[i] {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// ResolveIDs turns each argument into a sandbox id, as docker does: a
// whole id is taken as it is (whether it exists is for the command's own
// call to say), and so is a whole UUID ("microvm-" is added); any other
// argument must be a prefix of exactly one sandbox's id (with or without
// "microvm-", any case) among those list returns, asked once for all of
// them. Errors: what cannot begin an id is "sandbox X not found (sandbox
// ids look like microvm-<uuid>)" before any call; a prefix of none is
// "sandbox X not found"; a prefix of several is an *AmbiguousIDError
// naming a few of them (exit 1, as docker's "multiple IDs found"). The
// ids come back in the order of args, each once.
func ResolveIDs(ctx context.Context, args []string, list Candidates) ([]string, error) {
	out := make([]string, 0, len(args))
	var pending []int
	for i, a := range args {
		switch {
		case sandboxID.MatchString(a):
			out = append(out, a)
		case bareUUID.MatchString(a):
			out = append(out, idPrefix+a)
		case isIDPrefix(a):
			out = append(out, "")
			pending = append(pending, i)
		default:
			return nil, CheckID(a)
		}
	}
	if len(pending) > 0 {
		all, err := list(ctx)
		if err != nil {
			return nil, err
		}
		for _, i := range pending {
			id, err := matchPrefix(args[i], all)
			if err != nil {
				return nil, err
			}
			out[i] = id
		}
	}
	seen := make(map[string]bool, len(out))
	uniq := out[:0]
	for _, id := range out {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	return uniq, nil
}

// ResolveID is ResolveIDs for one argument.
func ResolveID(ctx context.Context, arg string, list Candidates) (string, error) {
	ids, err := ResolveIDs(ctx, []string{arg}, list)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

func matchPrefix(p string, all []Candidate) (string, error) {
	lp := strings.ToLower(p)
	var matches []Candidate
	for _, c := range all {
		id := strings.ToLower(c.ID)
		if id == lp {
			return c.ID, nil // an exact match wins
		}
		if strings.HasPrefix(id, lp) || strings.HasPrefix(strings.TrimPrefix(id, idPrefix), lp) {
			matches = append(matches, c)
		}
	}
	switch len(matches) {
	case 0:
		return "", &SandboxError{ID: p, Err: ErrNoSandbox}
	case 1:
		return matches[0].ID, nil
	}
	return "", &SandboxError{ID: p, Err: &AmbiguousIDError{Prefix: p, Matches: matches}}
}
