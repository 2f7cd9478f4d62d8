package mcpserver

import (
	"strconv"
	"unicode/utf8"
)

// MaxOutputChars is how much text one tool result carries at most: the
// text fields of a result share it (a command's stdout and stderr), so a
// chatty command cannot flood the agent's context.
const MaxOutputChars = 100_000

// cutNote is the line put where text was cut.
func cutNote(n int) string {
	return "\n[rayito: " + strconv.Itoa(n) + " characters cut here]\n"
}

// cut returns s with at most limit characters (runes; bytes that are not
// UTF-8 count one each) of its own, and how many it left out. A cut keeps
// the head (four fifths of limit) and the tail (the end of a build log is
// where its error is), joined by a note saying how many characters went.
func cut(s string, limit int) (string, int) {
	if limit < 0 {
		limit = 0
	}
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, 0
	}
	head := limit * 4 / 5
	tail := limit - head
	hb := byteOffset(s, head)
	tb := byteOffset(s, n-tail)
	dropped := n - head - tail
	return s[:hb] + cutNote(dropped) + s[tb:], dropped
}

// byteOffset is the byte offset of the rune with index i in s.
func byteOffset(s string, i int) int {
	off := 0
	for range i {
		_, size := utf8.DecodeRuneInString(s[off:])
		off += size
	}
	return off
}

// share splits limit between texts of these rune counts: a text that
// needs less than an equal share leaves the rest to the others.
func share(limit int, counts ...int) []int {
	out := make([]int, len(counts))
	left, open := limit, len(counts)
	done := make([]bool, len(counts))
	for open > 0 {
		progress := false
		for i, c := range counts {
			if !done[i] && c <= left/open {
				out[i], left, done[i] = c, left-c, true
				open--
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	if open > 0 {
		each := left / open
		for i := range counts {
			if !done[i] {
				out[i] = each
			}
		}
	}
	return out
}

// cutAll cuts texts to share MaxOutputChars and returns the total number
// of characters left out.
func cutAll(texts ...*string) int {
	counts := make([]int, len(texts))
	for i, t := range texts {
		counts[i] = utf8.RuneCountInString(*t)
	}
	total := 0
	for i, l := range share(MaxOutputChars, counts...) {
		var d int
		*texts[i], d = cut(*texts[i], l)
		total += d
	}
	return total
}
