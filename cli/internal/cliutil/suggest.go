package cliutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"
)

// maxSuggestions bounds the names a "did you mean" offers.
const maxSuggestions = 3

// Suggest returns the names a mistyped one probably meant, as gh does,
// closest first: those within one edit of it per three letters typed,
// at least one and at most two (an edit: an insertion, a deletion, a
// substitution or two neighbours swapped; any case), or that it begins.
// Only the closest are kept.
// Nothing for an empty typed name.
func Suggest(typed string, names []string) []string {
	if typed == "" {
		return nil
	}
	t := strings.ToLower(typed)
	limit := min(max(len(t)/3, 1), 2)
	best := limit + 1
	var out []string
	for _, n := range names {
		l := strings.ToLower(n)
		d := editDistance(t, l)
		if strings.HasPrefix(l, t) {
			d = min(d, 1)
		}
		switch {
		case l == t || d > limit || d > best:
		case d < best:
			best, out = d, []string{n}
		default:
			out = append(out, n)
		}
	}
	return out[:min(len(out), maxSuggestions)]
}

// DidYouMean is "; did you mean "a" or "b"?" for the names Suggest finds
// (each shown through show: quoting, dashes), or "".
func DidYouMean(typed string, names []string, show func(string) string) string {
	s := Suggest(typed, names)
	if len(s) == 0 {
		return ""
	}
	for i := range s {
		s[i] = show(s[i])
	}
	if len(s) == 1 {
		return "; did you mean " + s[0] + "?"
	}
	return "; did you mean " + strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1] + "?"
}

// Quoted shows a name in double quotes.
func Quoted(s string) string { return fmt.Sprintf("%q", s) }

// CommandNames are the names a user can type for cmd's visible
// subcommands.
func CommandNames(cmd *cli.Command) []string {
	var out []string
	for _, c := range cmd.VisibleCommands() {
		out = append(out, c.Name)
	}
	return out
}

// UnknownCommand is the usage error for a subcommand name cmd does not
// have, with the names it probably meant.
func UnknownCommand(cmd *cli.Command, name string) error {
	return Usagef("unknown command %q for %q%s", name, cmd.FullName(), DidYouMean(name, CommandNames(cmd), Quoted))
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein's, with a swap of two neighbours as one edit), in bytes.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// FlagError is FlagMessage, and for an unknown long flag the flags of
// cmd and of the commands above it (the global ones) it probably meant.
func FlagError(cmd *cli.Command, err error) error {
	msg := FlagMessage(err)
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if name = strings.TrimLeft(name, "-"); !ok || len(name) < 2 {
		return msg
	}
	var names []string
	seen := map[string]bool{}
	for _, c := range cmd.Lineage() {
		for _, fl := range c.VisibleFlags() {
			for _, n := range fl.Names() {
				if len(n) > 1 && !seen[n] {
					seen[n] = true
					names = append(names, n)
				}
			}
		}
	}
	if s := DidYouMean(name, names, dashed); s != "" {
		return errors.New(msg.Error() + s)
	}
	return msg
}
