package image

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// A template merged into the image artifact (rayito template build on
// AWS): its Dockerfile layer goes into the artifact's Dockerfile before
// the final CMD/ENTRYPOINT, its copied files under TemplateDir.
const (
	// TemplateDir is the directory of a merged template's files in the
	// artifact: its context under TemplateDir+"context/", its runtime
	// configuration at TemplateDir+TemplateRuntimeName.
	TemplateDir = "template/"
	// TemplateRuntimeName is the merged runtime configuration's file
	// name in TemplateDir.
	TemplateRuntimeName = "runtime.json"
	// templateContextDir is the context directory inside a template's own
	// artifact (proto/template.ContextDir).
	templateContextDir = "context/"
	// maxLayerLen bounds a template layer (the SDK's Dockerfile cap).
	maxLayerLen = 1 << 20
)

// ErrLayer is matched (errors.Is) by every *LayerError.
var ErrLayer = errors.New("template layer refused")

// LayerError: a template's Dockerfile layer or the base Dockerfile cannot
// be merged. Line is the line (from 1) of the text concerned, 0 for none;
// Reason never quotes the text.
type LayerError struct {
	Base   bool // the base Dockerfile (else the template's layer)
	Line   int
	Reason string
}

func (e *LayerError) Error() string {
	what := "the template's Dockerfile layer"
	if e.Base {
		what = "the base Dockerfile"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s, line %d: %s", what, e.Line, e.Reason)
	}
	return what + ": " + e.Reason
}

// Is matches ErrLayer.
func (e *LayerError) Is(target error) bool { return target == ErrLayer }

// TemplateLayer returns the instruction lines of a template's Dockerfile
// layer (sdk/template's rendering: one instruction a line) after its
// FROM, ready to go into the image's Dockerfile: every COPY source, which
// names context/... of the template's artifact, is moved under
// TemplateDir. Comment and blank lines are kept; a line continuation, a
// parser directive, a second FROM, ADD, a COPY not in the JSON form or
// whose source is outside context/, and a COPY --from are refused.
func TemplateLayer(dockerfile string) ([]string, error) {
	if len(dockerfile) > maxLayerLen {
		return nil, &LayerError{Reason: "larger than 1 MiB"}
	}
	if !utf8.ValidString(dockerfile) || strings.ContainsRune(dockerfile, 0) || strings.Contains(dockerfile, "\r") {
		return nil, &LayerError{Reason: "not text (UTF-8 lines without NUL or CR)"}
	}
	var (
		out     []string
		seenFrm bool
	)
	for i, line := range strings.Split(strings.TrimSuffix(dockerfile, "\n"), "\n") {
		n := i + 1
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "#") {
			if seenFrm {
				out = append(out, line)
			}
			continue
		}
		if strings.HasSuffix(trim, "\\") {
			return nil, &LayerError{Line: n, Reason: "a line continuation (the layer has one instruction a line)"}
		}
		kw, rest, _ := strings.Cut(trim, " ")
		kw = strings.ToUpper(kw)
		if !seenFrm {
			if kw != "FROM" {
				return nil, &LayerError{Line: n, Reason: "an instruction before FROM"}
			}
			seenFrm = true
			continue
		}
		switch kw {
		case "FROM":
			return nil, &LayerError{Line: n, Reason: "a second FROM"}
		case "RUN", "ENV", "WORKDIR", "USER":
			out = append(out, trim)
		case "COPY":
			l, err := rewriteCopy(strings.TrimSpace(rest))
			if err != nil {
				return nil, &LayerError{Line: n, Reason: err.Error()}
			}
			out = append(out, l)
		default:
			return nil, &LayerError{Line: n, Reason: "instruction " + safeKeyword(kw) + " is not one of a template layer's (RUN, COPY, ENV, WORKDIR, USER)"}
		}
	}
	if !seenFrm {
		return nil, &LayerError{Reason: "no FROM"}
	}
	return out, nil
}

// rewriteCopy rewrites `[--chown=OWNER ]["context/SRC", "DST"]`.
func rewriteCopy(rest string) (string, error) {
	var flag string
	if strings.HasPrefix(rest, "--") {
		f, r, _ := strings.Cut(rest, " ")
		owner, ok := strings.CutPrefix(f, "--chown=")
		if !ok || (owner != "root" && owner != "user") {
			return "", errors.New("COPY takes no flag but --chown=root or --chown=user")
		}
		flag, rest = f+" ", strings.TrimSpace(r)
	}
	var args []string
	dec := json.NewDecoder(strings.NewReader(rest))
	if err := dec.Decode(&args); err != nil || dec.More() || len(args) != 2 || !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return "", errors.New(`COPY must be ["context/SRC", "/DST"]`)
	}
	src, dst := args[0], args[1]
	rel, ok := strings.CutPrefix(src, templateContextDir)
	if src == strings.TrimSuffix(templateContextDir, "/") {
		rel, ok = ".", true
	}
	if !ok || rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." || path.IsAbs(rel) {
		return "", errors.New("a COPY source must be a clean path under context/")
	}
	if !path.IsAbs(dst) || path.Clean(dst) != dst {
		return "", errors.New("a COPY destination must be a clean absolute path")
	}
	return "COPY " + flag + jsonArray(path.Join(TemplateDir+templateContextDir, rel), dst), nil
}

func jsonArray(elems ...string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(elems) // strings always encode
	return strings.TrimSuffix(buf.String(), "\n")
}

// safeKeyword returns an instruction keyword fit to print.
func safeKeyword(kw string) string {
	if len(kw) > 16 {
		return "(a long word)"
	}
	for _, r := range kw {
		if (r < 'A' || r > 'Z') && r != '_' {
			return "(not a word)"
		}
	}
	return kw
}

// TemplateTrailer is what follows a template's layer in the image's
// Dockerfile: the runtime configuration copied to runtimePath, where rayd
// reads it, then USER root and WORKDIR / again, because rayd, the
// entrypoint, runs as root from /; the template's user and directory are
// its sandboxes' defaults, which rayd applies from the runtime
// configuration.
func TemplateTrailer(runtimePath string) []string {
	return []string{
		"# The template's runtime configuration (defaults and start command), read by rayd.",
		"COPY " + jsonArray(TemplateDir+TemplateRuntimeName, runtimePath),
		"# rayd runs as root from /: the template's user and directory are its sandboxes' defaults.",
		"USER root",
		"WORKDIR /",
	}
}

// InsertLayer returns the base Dockerfile with lines inserted before its
// final CMD/ENTRYPOINT instruction (before the run of CMD and ENTRYPOINT
// instructions that holds it, and the comment lines directly above that
// run), or at its end when it has none. Line continuations are followed; a
// parser directive that changes the escape character is refused, as is a
// multi-stage base (a second FROM).
func InsertLayer(base string, lines []string) (string, error) {
	if len(base) > maxLayerLen {
		return "", &LayerError{Base: true, Reason: "larger than 1 MiB"}
	}
	src := strings.Split(base, "\n")
	trailingNL := strings.HasSuffix(base, "\n")
	if trailingNL {
		src = src[:len(src)-1]
	}
	type instr struct {
		kw          string
		first, last int // line indexes
	}
	var (
		instrs   []instr
		froms    int
		inDirect = true // parser directives come first
	)
	for i := 0; i < len(src); i++ {
		trim := strings.TrimSpace(src[i])
		if trim == "" {
			inDirect = false
			continue
		}
		if strings.HasPrefix(trim, "#") {
			if inDirect {
				d := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(trim, "#"), " ", ""))
				if strings.HasPrefix(d, "escape=") {
					return "", &LayerError{Base: true, Line: i + 1, Reason: "the escape parser directive is not supported"}
				}
			}
			continue
		}
		inDirect = false
		kw, _, _ := strings.Cut(trim, " ")
		kw, _, _ = strings.Cut(kw, "\t")
		in := instr{kw: strings.ToUpper(kw), first: i}
		// A line ending in a backslash continues on the next; comment and
		// blank lines inside an instruction are skipped, as Docker does.
		for strings.HasSuffix(strings.TrimRight(src[i], " \t\r"), "\\") && i+1 < len(src) {
			i++
			for i+1 < len(src) && isCommentOrBlank(src[i]) {
				i++
			}
		}
		in.last = i
		if in.kw == "FROM" {
			froms++
		}
		instrs = append(instrs, in)
	}
	switch {
	case froms == 0:
		return "", &LayerError{Base: true, Reason: "no FROM"}
	case froms > 1:
		return "", &LayerError{Base: true, Reason: "a multi-stage Dockerfile (more than one FROM)"}
	}
	isStart := func(j int) bool { return instrs[j].kw == "CMD" || instrs[j].kw == "ENTRYPOINT" }
	at, k := len(src), len(instrs)-1
	for k >= 0 && !isStart(k) {
		k--
	}
	for k > 0 && isStart(k-1) {
		k--
	}
	if k > 0 { // instrs[0] is the FROM
		at = instrs[k].first
		// The comment lines directly above belong to the instruction.
		for at > 0 && at-1 > instrs[k-1].last && strings.HasPrefix(strings.TrimSpace(src[at-1]), "#") {
			at--
		}
	}
	var b strings.Builder
	for _, l := range src[:at] {
		b.WriteString(l + "\n")
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if at < len(src) {
		b.WriteString("\n")
	}
	for i, l := range src[at:] {
		b.WriteString(l)
		if i < len(src)-at-1 || trailingNL {
			b.WriteString("\n")
		}
	}
	return b.String(), nil
}

func isCommentOrBlank(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || strings.HasPrefix(t, "#")
}
