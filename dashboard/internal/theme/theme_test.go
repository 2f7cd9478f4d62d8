package theme

import (
	"bytes"
	"encoding/xml"
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := []string{
		`{}`,
		`{"title":"Acme sandboxes","font":"Inter, system-ui, sans-serif","colors":{"background":"#000000","accent":"#A0b1C2"}}`,
		`{"title":"` + strings.Repeat("é", 64) + `"}`,
		`{"font":"IBM Plex Sans-2, monospace"}`,
	}
	for _, in := range good {
		if _, err := Parse([]byte(in)); err != nil {
			t.Errorf("Parse(%s): %v", in, err)
		}
	}
	bad := []string{
		``, `[]`, `null`, `"x"`, `{"title":1}`,
		`{"colour":"#000000"}`,                                    // unknown key
		`{"colors":{"link":"#000000"}}`,                           // unknown color
		`{"colors":{"accent":"red"}}`,                             // not #rrggbb
		`{"colors":{"accent":"#fff"}}`,                            // short
		`{"colors":{"accent":"#ff0000;x:y"}}`,                     // injection
		`{"font":"x;} body{background:url(//e)}"}`,                // CSS injection
		`{"font":"\"Inter\""}`,                                    // quotes
		`{"font":"a,b,c,d,e"}`,                                    // too many
		`{"font":"Inter\\,x"}`,                                    // escapes
		`{"font":""}`,                                             // empty
		`{"font":" , serif"}`,                                     // empty family
		`{"font":"9lives"}`,                                       // starts with a digit
		`{"title":""}`,                                            // empty title
		`{"title":"` + strings.Repeat("a", 65) + `"}`,             // long
		`{"title":"a\u0000b"}`,                                    // control
		`{"title":"a\u202eb"}`,                                    // bidi
		`{} {}`,                                                   // trailing
		"{\"title\":\"\xff\"}",                                    // not UTF-8
		`{"title":"x","title":"y","extra":1}`,                     // unknown key after a duplicate
		`{"title":"x"` + strings.Repeat(" ", MaxThemeBytes) + `}`, // large
	}
	for _, in := range bad {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%.60q) = %v, want ErrInvalid", in, err)
		}
	}
}

// cssValue is what the generated CSS may hold: custom properties of
// colors and a font list, nothing else.
var cssShape = regexp.MustCompile(`\A:root \{\n(  --(bg|surface|text|muted|accent|danger): #[0-9a-f]{6};\n){6}  --font: ("[A-Za-z][A-Za-z0-9 -]*"|[a-z-]+)(, ("[A-Za-z][A-Za-z0-9 -]*"|[a-z-]+)){0,3};\n\}\n\z`)

func TestCSS(t *testing.T) {
	th, err := Parse([]byte(`{"font":"Inter , serif","colors":{"accent":"#ABCDEF"}}`))
	if err != nil {
		t.Fatal(err)
	}
	css := string(th.CSS())
	if !cssShape.MatchString(css) || !strings.Contains(css, `--font: "Inter", serif;`) || !strings.Contains(css, "--accent: #abcdef;") {
		t.Fatalf("CSS:\n%s", css)
	}
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateLogo(t *testing.T) {
	const open = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10">`
	good := []string{
		open + `<rect width="10" height="10" fill="#f00"/></svg>`,
		`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + open + `<defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient></defs><circle r="4" fill="url(#g)" style="opacity:.5"/><use xlink:href="#g"/><title>Acme &amp; co</title></svg>`,
	}
	for _, in := range good {
		if err := ValidateLogo([]byte(in)); err != nil {
			t.Errorf("ValidateLogo(%s): %v", in, err)
		}
	}
	bad := []string{
		``,
		`<html/>`,
		`<svg/>`, // no namespace
		open + `<script>alert(1)</script></svg>`,
		open + `<SCRIPT>alert(1)</SCRIPT></svg>`,
		open + `<foreignObject><div xmlns="http://www.w3.org/1999/xhtml">x</div></foreignObject></svg>`,
		open + `<rect onload="alert(1)"/></svg>`,
		open + `<rect ONCLICK="alert(1)"/></svg>`,
		`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`,
		open + `<image href="https://evil.example/x.png"/></svg>`,
		open + `<use href="https://evil.example/x.svg#a"/></svg>`,
		open + `<use xlink:href="data:image/svg+xml,x"/></svg>`,
		open + `<a href="javascript:alert(1)"><rect/></a></svg>`,
		open + `<rect fill="url(https://evil.example/x)"/></svg>`,
		open + `<rect fill="url( 'https://e/x')"/></svg>`,
		open + `<rect style="background:url(//evil.example/x)"/></svg>`,
		open + `<rect style="x:\75rl(//e)"/></svg>`,
		open + `<style>@import url(//evil.example/x.css);</style></svg>`,
		open + `<animate attributeName="href" to="javascript:alert(1)"/></svg>`,
		open + `<set attributeName="onload" to="alert(1)"/></svg>`,
		open + `<iframe src="//e"/></svg>`,
		`<!DOCTYPE svg [<!ENTITY x "y">]>` + open + `<text>&x;</text></svg>`,
		open + `<text>&x;</text></svg>`,
		`<?xml-stylesheet href="//evil.example/x.css"?>` + open + `</svg>`,
		open + `<rect xml:base="https://evil.example/"/></svg>`,
		open + `</svg>` + open + `</svg>`,
		open + `<rect>`,
		"<svg xmlns=\"http://www.w3.org/2000/svg\">\xff</svg>",
		open + strings.Repeat("<g>", maxDepth+1) + strings.Repeat("</g>", maxDepth+1) + `</svg>`,
		open + `<rect/></svg>` + strings.Repeat(" ", MaxLogoBytes),
		open + `<svg:script xmlns:svg="http://www.w3.org/2000/svg">x</svg:script></svg>`,
		open + `<h:script xmlns:h="http://www.w3.org/1999/xhtml">x</h:script></svg>`,
	}
	for _, in := range bad {
		if err := ValidateLogo([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateLogo(%.80q) = %v, want ErrInvalid", in, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"title":"x","font":"Inter, serif","colors":{"accent":"#000000"}}`, `{"font":"a;b"}`, `{"colors":{"text":"#zzzzzz"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		th, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if err := th.Validate(); err != nil {
			t.Fatalf("accepted an invalid theme: %v", err)
		}
		if css := string(th.CSS()); !cssShape.MatchString(css) {
			t.Fatalf("CSS out of shape:\n%s", css)
		}
	})
}

func FuzzValidateLogo(f *testing.F) {
	for _, s := range []string{
		`<svg xmlns="http://www.w3.org/2000/svg"><rect fill="url(#a)"/></svg>`,
		`<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>`,
		`<!DOCTYPE x><svg xmlns="http://www.w3.org/2000/svg"/>`,
		`<svg xmlns="http://www.w3.org/2000/svg"><use href="#x" onclick="y"/></svg>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ValidateLogo(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		// Whatever is accepted, read again with another decoder, has no
		// code or loading construct a browser would act on.
		dec := xml.NewDecoder(bytes.NewReader(data))
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tt := tok.(type) {
			case xml.Directive:
				t.Fatalf("accepted a directive %q", tt)
			case xml.StartElement:
				switch strings.ToLower(tt.Name.Local) {
				case "script", "foreignobject", "iframe", "image", "style", "a", "animate", "set", "object", "embed":
					t.Fatalf("accepted <%s>", tt.Name.Local)
				}
				for _, a := range tt.Attr {
					n := strings.ToLower(a.Name.Local)
					if strings.HasPrefix(n, "on") || (n == "href" && !strings.HasPrefix(strings.TrimSpace(a.Value), "#")) {
						t.Fatalf("accepted attribute %s=%q", a.Name.Local, a.Value)
					}
				}
			}
		}
	})
}
