package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// The page never parses data as HTML or code, and has nothing inline
// that the CSP (script-src 'self'; style-src 'self') would have to allow.
func TestNoHTMLSinksNoInline(t *testing.T) {
	js, err := files.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setTimeout(\"", "setInterval(\"", "srcdoc", "DOMParser", "createContextualFragment"} {
		if strings.Contains(string(js), sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	html, err := files.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>`)
	for _, bad := range []*regexp.Regexp{inlineScript, regexp.MustCompile(`<style`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`javascript:`), regexp.MustCompile(`(src|href)="(https?:)?//`)} {
		if bad.Match(html) {
			t.Errorf("index.html matches %s", bad)
		}
	}
	// Every file the page names is served.
	err = fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !Has("/" + strings.TrimPrefix(p, "static/")) {
			t.Errorf("%s is embedded but not served", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
