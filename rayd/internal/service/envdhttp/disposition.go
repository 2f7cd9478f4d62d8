package envdhttp

import "strings"

// MaxFilenameLen bounds the filename FormFile accepts (safefs's own path
// limit is lower; this only bounds the parser's work).
const MaxFilenameLen = 8192

// FormFile parses a multipart part's raw Content-Disposition header and
// returns its form field name and its filename exactly as sent: unlike
// multipart.Part.FileName it keeps the directories, since the e2b SDKs
// send the full target path there. ok is false unless the header is a
// form-data disposition; filename is "" when it has none (a plain form
// field, which envd takes as the file when the path query names the
// target: E2B's presigned upload links are posted so).
//
// Values may be tokens or quoted strings; in a quoted string a backslash
// escapes '"' and '\' (anything else keeps the backslash, so Windows-like
// names survive), and the escapes the WHATWG form-data encoding (undici,
// browsers) applies to names, %22 %0A %0D, are decoded back. An RFC 2231
// filename* (charset'lang'pct-encoded) is used when there is no filename.
// Control characters (NUL included) make the header invalid.
func FormFile(h string) (name, filename string, ok bool) {
	if len(h) > 4*MaxFilenameLen {
		return "", "", false
	}
	typ, rest, _ := strings.Cut(h, ";")
	if !strings.EqualFold(strings.TrimSpace(typ), "form-data") {
		return "", "", false
	}
	var ext string
	var haveFile, haveExt bool
	for {
		rest = strings.TrimLeft(rest, " \t;")
		if rest == "" {
			break
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return "", "", false
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var val string
		var good bool
		val, rest, good = value(rest)
		if !good {
			return "", "", false
		}
		switch key {
		case "name":
			name = decodeWHATWG(val)
		case "filename":
			filename, haveFile = decodeWHATWG(val), true
		case "filename*":
			ext, haveExt = val, true
		}
	}
	if !haveFile && haveExt {
		f, good := decode2231(ext)
		if !good {
			return "", "", false
		}
		filename, haveFile = f, true
	}
	if len(filename) > MaxFilenameLen {
		return "", "", false
	}
	for i := 0; i < len(filename); i++ {
		if filename[i] < 0x20 || filename[i] == 0x7f {
			return "", "", false
		}
	}
	return name, filename, true
}

// value reads a token or a quoted string at the start of s and returns it
// and the rest after the next ';'.
func value(s string) (val, rest string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
				b.WriteByte(s[i+1])
				i++
			case c == '"':
				after := strings.TrimLeft(s[i+1:], " \t")
				if after != "" && after[0] != ';' {
					return "", "", false
				}
				return b.String(), after, true
			default:
				b.WriteByte(c)
			}
		}
		return "", "", false // unterminated
	}
	end := strings.IndexByte(s, ';')
	if end < 0 {
		end = len(s)
	}
	val = strings.TrimSpace(s[:end])
	if val == "" || strings.ContainsAny(val, "\" \t") {
		return "", "", false
	}
	return val, s[end:], true
}

// decodeWHATWG undoes the form-data encoding of names: %22 → '"',
// %0A → LF, %0D → CR (the latter two then fail the control check).
func decodeWHATWG(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	r := strings.NewReplacer("%22", `"`, "%0A", "\n", "%0a", "\n", "%0D", "\r", "%0d", "\r")
	return r.Replace(s)
}

// decode2231 decodes an RFC 2231 extended value charset'lang'value: UTF-8
// or US-ASCII only.
func decode2231(s string) (string, bool) {
	parts := strings.SplitN(s, "'", 3)
	if len(parts) != 3 {
		return "", false
	}
	switch strings.ToLower(parts[0]) {
	case "utf-8", "us-ascii":
	default:
		return "", false
	}
	v := parts[2]
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(v) {
			return "", false
		}
		hi, lo := unhex(v[i+1]), unhex(v[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
