package template

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLargeInputs: inputs near the size limit in the shapes that could
// make the parser quadratic (joined continuations, many steps, words,
// quotes) parse in time linear in their size.
func TestLargeInputs(t *testing.T) {
	t.Parallel()
	n := 100000
	for name, in := range map[string]string{
		"continuations": "FROM a\nRUN " + strings.Repeat("\\\n", n),
		"comments":      "FROM a\n" + strings.Repeat("#\n", n),
		"blank":         "FROM a\n" + strings.Repeat("\n", n),
		"env words":     "FROM a\nENV " + strings.Repeat("a=b ", n/2),
		"copy srcs":     "FROM a\nCOPY " + strings.Repeat("a ", n) + "/x/",
		"expose":        "FROM a\nEXPOSE " + strings.Repeat("80 ", n/2),
		"cmd json":      "FROM a\nCMD [" + strings.Repeat("\"a\",", n/2) + "\"a\"]",
		"quotes":        "FROM a\nENV a=" + strings.Repeat("''", n),
		"dquotes":       "FROM a\nENV a=\"" + strings.Repeat("\\\"", n) + "\"",
		"flags":         "FROM a\nCOPY " + strings.Repeat("--chown=user ", n/8) + "a /b",
		"runs":          "FROM a\n" + strings.Repeat("RUN x\n", n/4),
		"entry exec":    "FROM a\nENTRYPOINT [" + strings.Repeat("\"a b\",", n/4) + "\"a\"]\nCMD [" + strings.Repeat("\"a\",", n/4) + "\"a\"]",
		"long line":     "FROM a\nRUN " + strings.Repeat("x", 1<<20-20),
		"heredocish":    "FROM a\nRUN " + strings.Repeat("<<", n),
		"user":          "FROM a\n" + strings.Repeat("USER user\n", n/4),
		"workdir":       "FROM a\n" + strings.Repeat("WORKDIR a\n", n/4),
	} {
		start := time.Now()
		_, err := FromDockerfile(in)
		if err != nil && !errors.Is(err, ErrDockerfile) {
			t.Errorf("%s: untyped error %v", name, err)
		}
		t.Logf("%s: %d bytes in %v", name, len(in), time.Since(start))
	}
}
