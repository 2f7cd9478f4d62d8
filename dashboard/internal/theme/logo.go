package theme

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxLogoBytes bounds a logo file.
const MaxLogoBytes = 64 << 10

// maxDepth bounds the logo's element nesting.
const maxDepth = 64

const svgNS = "http://www.w3.org/2000/svg"

// logoElements are the SVG elements a logo may use: shapes, text,
// gradients, grouping and local references. No script, foreignObject,
// style, image, a, animation or anything that loads.
var logoElements = map[string]bool{
	"svg": true, "g": true, "defs": true, "title": true, "desc": true, "symbol": true, "use": true,
	"path": true, "rect": true, "circle": true, "ellipse": true, "line": true, "polyline": true, "polygon": true,
	"text": true, "tspan": true, "lineargradient": true, "radialgradient": true, "stop": true,
	"clippath": true, "mask": true, "pattern": true, "metadata": true,
}

// ValidateLogo checks an SVG logo: at most 64 KiB of UTF-8, well-formed
// XML whose root is an svg element of the SVG namespace, no DOCTYPE (so
// no entities), no processing instruction but the XML declaration, only
// the elements of a static drawing (no script, foreignObject, style,
// image, a or animation), no event attribute (on*), no href but a local
// #fragment, no url() but url(#fragment), and no xml:base.
func ValidateLogo(data []byte) error {
	if len(data) > MaxLogoBytes {
		return fmt.Errorf("%w: the logo is larger than %d bytes", ErrInvalid, MaxLogoBytes)
	}
	if len(data) == 0 || !utf8.Valid(data) {
		return fmt.Errorf("%w: the logo is not UTF-8 SVG", ErrInvalid)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	// No entities beyond XML's five.
	dec.Entity = nil
	dec.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		return nil, errors.New("only UTF-8")
	}
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: the logo is not well-formed XML", ErrInvalid)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return fmt.Errorf("%w: the logo has a DOCTYPE or another directive (entities are refused)", ErrInvalid)
		case xml.ProcInst:
			if t.Target != "xml" {
				return fmt.Errorf("%w: the logo has a processing instruction", ErrInvalid)
			}
		case xml.StartElement:
			if depth == 0 {
				roots++
				if roots > 1 || t.Name.Local != "svg" || t.Name.Space != svgNS {
					return fmt.Errorf("%w: the logo's root must be one <svg xmlns=%q>", ErrInvalid, svgNS)
				}
			}
			depth++
			if depth > maxDepth {
				return fmt.Errorf("%w: the logo nests more than %d elements", ErrInvalid, maxDepth)
			}
			if t.Name.Space != svgNS || !logoElements[strings.ToLower(t.Name.Local)] {
				return fmt.Errorf("%w: the logo has a <%s> element (only static drawing elements)", ErrInvalid, elementName(t.Name.Local))
			}
			for _, a := range t.Attr {
				if err := checkAttr(a); err != nil {
					return err
				}
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return fmt.Errorf("%w: text outside the logo's svg element", ErrInvalid)
			}
		}
	}
	if roots != 1 {
		return fmt.Errorf("%w: the logo has no svg element", ErrInvalid)
	}
	return nil
}

// elementName is a refused element's name for a message: printable ASCII
// only, at most 32 bytes.
func elementName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 32; i++ {
		if c := s[i]; c > 0x20 && c < 0x7f {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func checkAttr(a xml.Attr) error {
	name := strings.ToLower(a.Name.Local)
	value := strings.ToLower(a.Value)
	switch {
	case strings.HasPrefix(name, "on"):
		return fmt.Errorf("%w: the logo has an event attribute", ErrInvalid)
	case name == "base" && a.Name.Space == "http://www.w3.org/XML/1998/namespace", name == "base":
		return fmt.Errorf("%w: the logo has xml:base", ErrInvalid)
	case name == "href" || name == "src":
		if !strings.HasPrefix(strings.TrimSpace(a.Value), "#") {
			return fmt.Errorf("%w: the logo refers to something outside itself (an href other than #fragment)", ErrInvalid)
		}
	}
	// Any value that loads something: url() other than url(#...), CSS
	// imports, escapes and legacy script hooks.
	compact := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' {
			return -1
		}
		return r
	}, value)
	for i := 0; ; {
		j := strings.Index(compact[i:], "url(")
		if j < 0 {
			break
		}
		i += j + len("url(")
		rest := strings.TrimLeft(compact[i:], `'"`)
		if !strings.HasPrefix(rest, "#") {
			return fmt.Errorf("%w: the logo refers to something outside itself (url() other than url(#fragment))", ErrInvalid)
		}
	}
	for _, bad := range []string{"@import", "\\", "javascript:", "expression(", "image-set(", "data:"} {
		if strings.Contains(compact, bad) {
			return fmt.Errorf("%w: the logo has an attribute that could load or run something", ErrInvalid)
		}
	}
	return nil
}
