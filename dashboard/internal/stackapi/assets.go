package stackapi

import _ "embed"

type asset struct{ ctype, body string }

var (
	//go:embed web/index.html
	indexHTML string
	//go:embed web/app.js
	appJS string
	//go:embed web/app.css
	appCSS string
)

// assets are the public static answers: the page, its module and sheet.
// The page holds no data; it signs in with the Hosted UI (authorization
// code with PKCE) and keeps the access token in memory.
var assets = map[string]asset{
	"/":        {"text/html; charset=utf-8", indexHTML},
	"/app.js":  {"text/javascript; charset=utf-8", appJS},
	"/app.css": {"text/css; charset=utf-8", appCSS},
}
