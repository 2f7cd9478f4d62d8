package stackapi

type asset struct{ ctype, body string }

// assets are the public static answers.
var assets = map[string]asset{
	"/": {"text/html; charset=utf-8", "<!doctype html><meta charset=utf-8><title>Rayito</title><p>Rayito dashboard stack</p>"},
}
