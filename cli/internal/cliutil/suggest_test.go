package cliutil

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	t.Parallel()
	names := []string{"create", "list", "info", "exec", "code", "shell", "git", "cp", "logs", "metrics", "network", "pause", "resume", "timeout", "kill"}
	for typed, want := range map[string]string{
		"lst":     "list",
		"lis":     "list",
		"kil":     "kill",
		"exce":    "exec", // two neighbours swapped: one edit
		"sh":      "shell",
		"pase":    "pause",
		"Pause":   "", // the name itself, any case: nothing to suggest
		"bogus":   "", // "logs" is two edits away: too far for five letters
		"ls":      "", // two edits from "list"
		"netwrok": "network",
		"":        "",
		"c":       "create code cp", // begins them (three at most)
	} {
		if got := strings.Join(Suggest(typed, names), " "); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", typed, got, want)
		}
	}
	if got := DidYouMean("bsh", []string{"bash", "zsh", "fish", "pwsh"}, Quoted); got != `; did you mean "bash" or "zsh"?` {
		t.Errorf("DidYouMean(bsh) = %q", got)
	}
	if got := DidYouMean("x", []string{"yy"}, Quoted); got != "" {
		t.Errorf("DidYouMean(x) = %q", got)
	}
}
