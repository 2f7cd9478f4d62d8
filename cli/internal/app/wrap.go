package app

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v3"
)

// HelpWidth is the width every help screen fits in.
const HelpWidth = 100

// Every help screen goes through fitWidth; a repeatable flag shows its
// value once, with "...", not urfave's "--x V [ --x V ]".
func init() {
	printHelp := cli.HelpPrinterCustom
	cli.HelpPrinterCustom = func(w io.Writer, templ string, data any, funcs map[string]any) {
		var b bytes.Buffer
		printHelp(&b, templ, data, funcs)
		_, _ = io.WriteString(w, fitWidth(b.String(), HelpWidth))
	}
	stringer := cli.FlagStringer
	cli.FlagStringer = func(fl cli.Flag) string { return compactRepeat(stringer(fl)) }
}

// compactRepeat turns urfave's "--env V, -e V [ --env V, -e V ]\tusage"
// into "--env V, -e V ...\tusage".
func compactRepeat(s string) string {
	names, usage, ok := strings.Cut(s, "\t")
	if i := strings.Index(names, " [ "); ok && i > 0 && strings.HasSuffix(names, " ]") {
		return names[:i] + " ...\t" + usage
	}
	return s
}

// fitWidth breaks every line of text longer than width at spaces. A
// continuation is indented to the line's second column (where a flag's or
// a command's usage, or an environment variable's meaning, begins: the
// text after the first run of two spaces past the indent), else to the
// line's own indent. A word longer than the room left stays whole, and
// so do "(default: VALUE)", "(AWS only)" and "(local only)".
func fitWidth(text string, width int) string {
	lines := strings.Split(text, "\n")
	out := make([]string, 0, len(lines))
	for _, line := range lines {
		out = append(out, fitLine(line, width)...)
	}
	return strings.Join(out, "\n")
}

func fitLine(line string, width int) []string {
	line = strings.TrimRight(line, " ")
	if utf8.RuneCountInString(line) <= width {
		return []string{line}
	}
	indent := len(line) - len(strings.TrimLeft(line, " "))
	hang := indent
	var out []string
	if i := strings.Index(line[indent:], "  "); i > 0 {
		col := indent + i + len(line[indent+i:]) - len(strings.TrimLeft(line[indent+i:], " "))
		if col <= width/2 {
			hang = col
		} else {
			// A first column too wide to leave room beside it: the
			// second goes under it, further in.
			out = append(out, strings.TrimRight(line[:col], " "))
			line = strings.Repeat(" ", indent+6) + line[col:]
			hang = indent + 6
		}
	}
	head, words := line[:hang], keepDefaults(strings.Fields(line[hang:]))
	pad := strings.Repeat(" ", hang)
	cur := head
	n := utf8.RuneCountInString(cur)
	fresh := true // nothing on cur after its indent yet
	for _, w := range words {
		wl := utf8.RuneCountInString(w)
		if !fresh && n+1+wl > width {
			out = append(out, cur)
			cur, n, fresh = pad, hang, true
		}
		if !fresh {
			cur += " "
			n++
		}
		cur += w
		n += wl
		fresh = false
	}
	return append(out, cur)
}

// keepDefaults joins urfave's "(default:" to the value after it, and the
// words of a backend mark ("(AWS only)"), so that neither is cut in two.
func keepDefaults(words []string) []string {
	out := words[:0]
	for i := 0; i < len(words); i++ {
		w := words[i]
		if i+1 < len(words) && (w == "(default:" || (w == "(AWS" || w == "(local") && words[i+1] == "only)") {
			out = append(out, w+" "+words[i+1])
			i++
			continue
		}
		out = append(out, w)
	}
	return out
}
