package template

import (
	"bytes"
	"encoding/json"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// renderDockerfile writes s as a Dockerfile layer: FROM the base, then one
// instruction per step, COPY sources under the artifact's context/
// directory. RUN uses the exec form ["/bin/sh", "-c", cmd], which Docker
// passes on untouched; ENV values are double-quoted with Docker's escapes.
// Paths carry no character Docker's word processing would interpret (the
// builder refuses them). The start command has no instruction here: the
// platform runs it; it is recorded as a JSON comment, one line whatever it
// holds, so it cannot be read as an instruction.
func renderDockerfile(s *ptemplate.Spec) string {
	var b strings.Builder
	b.WriteString("# The template as a Dockerfile layer, written by rayito's SDK (sdk/template).\n")
	b.WriteString("# COPY sources are under context/ in the template's artifact.\n")
	b.WriteString("FROM " + s.Base + "\n")
	for _, st := range s.Steps {
		switch {
		case st.Run != "":
			b.WriteString("RUN " + jsonArray("/bin/sh", "-c", st.Run) + "\n")
		case st.Copy != nil:
			b.WriteString("COPY ")
			if st.Copy.Owner != "" {
				b.WriteString("--chown=" + st.Copy.Owner + " ")
			}
			b.WriteString(jsonArray(path.Join(ptemplate.ContextDir, st.Copy.Src), st.Copy.Dst) + "\n")
		case st.Env != nil:
			b.WriteString("ENV")
			for _, k := range slices.Sorted(maps.Keys(st.Env)) {
				b.WriteString(" " + k + "=" + dockerDoubleQuote(st.Env[k]))
			}
			b.WriteString("\n")
		case st.Workdir != "":
			w := st.Workdir
			if strings.ContainsAny(w, " \t") {
				w = dockerDoubleQuote(w)
			}
			b.WriteString("WORKDIR " + w + "\n")
		case st.User != "":
			b.WriteString("USER " + st.User + "\n")
		}
	}
	if s.Start != nil {
		b.WriteString("# rayito start (run by the platform when a sandbox starts; not an instruction): " + jsonValue(s.Start) + "\n")
	}
	return b.String()
}

func jsonValue(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null" // strings and Start always encode
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func jsonArray(elems ...string) string {
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = jsonValue(e)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// dockerDoubleQuote quotes v for Docker's word processing: inside double
// quotes a backslash escapes '"', '$' and itself.
func dockerDoubleQuote(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`)
	return `"` + r.Replace(v) + `"`
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// shellQuote quotes one argument for /bin/sh.
func shellQuote(a string) string {
	if shellSafe.MatchString(a) {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// shellJoin is argv as one /bin/sh command line.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
