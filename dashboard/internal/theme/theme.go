// Package theme validates the local dashboard's user theme (a JSON file
// with closed keys) and logo (an SVG without code or external
// references), and generates the theme's CSS from the validated values
// only: nothing of the file reaches the page as written.
package theme

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rayito-dev/rayito/dashboard/internal/strictjson"
)

// ErrInvalid reports a theme or logo the dashboard refuses.
var ErrInvalid = errors.New("theme: invalid")

// MaxThemeBytes bounds a theme file.
const MaxThemeBytes = 16 << 10

// MaxTitle bounds the title, in characters.
const MaxTitle = 64

// Colors are the page's colors, each #rrggbb.
type Colors struct {
	Background string `json:"background,omitempty"`
	Surface    string `json:"surface,omitempty"`
	Text       string `json:"text,omitempty"`
	Muted      string `json:"muted,omitempty"`
	Accent     string `json:"accent,omitempty"`
	Danger     string `json:"danger,omitempty"`
}

// Theme is a validated theme.
type Theme struct {
	Title  string `json:"title,omitempty"`
	Font   string `json:"font,omitempty"`
	Colors Colors `json:"colors"`
}

// Default is the factory theme.
func Default() Theme {
	return Theme{
		Title: "Rayito dashboard",
		Font:  "system-ui, sans-serif",
		Colors: Colors{
			Background: "#f6f7f9", Surface: "#ffffff", Text: "#1d2330",
			Muted: "#5d6677", Accent: "#2f6fde", Danger: "#c62828",
		},
	}
}

// Parse validates a theme file: a JSON object with only the keys title,
// font and colors (background, surface, text, muted, accent, danger), each
// optional; colors #rrggbb, a title of at most 64 printable characters, a
// font of the grammar checkFont accepts. Missing values keep the factory
// ones.
func Parse(data []byte) (Theme, error) {
	if len(data) > MaxThemeBytes {
		return Theme{}, fmt.Errorf("%w: the theme file is larger than %d bytes", ErrInvalid, MaxThemeBytes)
	}
	if !utf8.Valid(data) {
		return Theme{}, fmt.Errorf("%w: the theme file is not UTF-8", ErrInvalid)
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return Theme{}, fmt.Errorf("%w: the theme is not a JSON object", ErrInvalid)
	}
	var in struct {
		Title  *string `json:"title"`
		Font   *string `json:"font"`
		Colors *Colors `json:"colors"`
	}
	// Exact keys, once each (strictjson): encoding/json alone matches
	// keys without regard to case and keeps the last of duplicates.
	if err := strictjson.Decode(data, &in); err != nil {
		return Theme{}, fmt.Errorf("%w: the theme is not a JSON object of title, font and colors (background, surface, text, muted, accent, danger), each key once and in lower case", ErrInvalid)
	}
	t := Default()
	if in.Title != nil {
		if err := checkTitle(*in.Title); err != nil {
			return Theme{}, err
		}
		t.Title = *in.Title
	}
	if in.Font != nil {
		if err := checkFont(*in.Font); err != nil {
			return Theme{}, err
		}
		t.Font = *in.Font
	}
	if in.Colors != nil {
		for _, c := range []struct {
			name string
			v    string
			dst  *string
		}{
			{"background", in.Colors.Background, &t.Colors.Background},
			{"surface", in.Colors.Surface, &t.Colors.Surface},
			{"text", in.Colors.Text, &t.Colors.Text},
			{"muted", in.Colors.Muted, &t.Colors.Muted},
			{"accent", in.Colors.Accent, &t.Colors.Accent},
			{"danger", in.Colors.Danger, &t.Colors.Danger},
		} {
			if c.v == "" {
				continue
			}
			if !isColor(c.v) {
				return Theme{}, fmt.Errorf("%w: colors.%s must be #rrggbb", ErrInvalid, c.name)
			}
			*c.dst = strings.ToLower(c.v)
		}
	}
	return t, nil
}

func checkTitle(s string) error {
	if s == "" || utf8.RuneCountInString(s) > MaxTitle {
		return fmt.Errorf("%w: the title is 1 to %d characters", ErrInvalid, MaxTitle)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfeff || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return fmt.Errorf("%w: the title has a control or bidi character", ErrInvalid)
		}
	}
	return nil
}

func isColor(s string) bool {
	if len(s) != 7 || s[0] != '#' {
		return false
	}
	for i := 1; i < 7; i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// genericFonts are the CSS generic families a font list may name.
var genericFonts = map[string]bool{
	"serif": true, "sans-serif": true, "monospace": true, "cursive": true, "fantasy": true,
	"system-ui": true, "ui-serif": true, "ui-sans-serif": true, "ui-monospace": true, "ui-rounded": true,
}

// MaxFonts bounds the families of a font list.
const MaxFonts = 4

// checkFont: one to four families separated by commas (spaces around
// them allowed); each a generic family, or a name of ASCII letters,
// digits, spaces and hyphens (1 to 40, starting with a letter, no double
// or trailing space). No quotes, escapes, semicolons or braces: the
// generator quotes names itself.
func checkFont(s string) error {
	bad := fmt.Errorf("%w: the font is 1 to %d comma-separated families: a generic one (serif, sans-serif, monospace, system-ui, ...) or a name of letters, digits, spaces and hyphens", ErrInvalid, MaxFonts)
	if len(s) == 0 || len(s) > 200 {
		return bad
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxFonts {
		return bad
	}
	for _, p := range parts {
		p = strings.Trim(p, " ")
		if !validFamily(p) {
			return bad
		}
	}
	return nil
}

func validFamily(p string) bool {
	if genericFonts[p] {
		return true
	}
	if len(p) == 0 || len(p) > 40 || !('a' <= p[0] && p[0] <= 'z' || 'A' <= p[0] && p[0] <= 'Z') || p[len(p)-1] == ' ' || strings.Contains(p, "  ") {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == ' ' || c == '-') {
			return false
		}
	}
	return true
}

// fontCSS is the font list as a CSS value: names quoted, generic
// families bare.
func fontCSS(s string) string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.Trim(p, " ")
		if genericFonts[p] {
			out = append(out, p)
		} else {
			out = append(out, `"`+p+`"`)
		}
	}
	return strings.Join(out, ", ")
}

// CSS is the theme's style sheet: custom properties the page's own
// style sheet uses. It is generated from validated values only.
func (t Theme) CSS() []byte {
	var b bytes.Buffer
	b.WriteString(":root {\n")
	fmt.Fprintf(&b, "  --bg: %s;\n  --surface: %s;\n  --text: %s;\n  --muted: %s;\n  --accent: %s;\n  --danger: %s;\n",
		t.Colors.Background, t.Colors.Surface, t.Colors.Text, t.Colors.Muted, t.Colors.Accent, t.Colors.Danger)
	fmt.Fprintf(&b, "  --font: %s;\n", fontCSS(t.Font))
	b.WriteString("}\n")
	return b.Bytes()
}

// Validate checks every value of t as Parse does (for a Theme built in
// code).
func (t Theme) Validate() error {
	if err := checkTitle(t.Title); err != nil {
		return err
	}
	if err := checkFont(t.Font); err != nil {
		return err
	}
	for _, c := range []string{t.Colors.Background, t.Colors.Surface, t.Colors.Text, t.Colors.Muted, t.Colors.Accent, t.Colors.Danger} {
		if !isColor(c) {
			return fmt.Errorf("%w: a color is not #rrggbb", ErrInvalid)
		}
	}
	return nil
}
