package sandbox

import (
	"errors"
	"strings"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// errMountFlag is a --mount value that is not PATH=BUCKET[/PREFIX][:MODE].
var errMountFlag = errors.New("--mount takes PATH=BUCKET[/PREFIX][:rw[,overwrite][,delete]]")

// parseMounts turns --mount values into WithMounts' map: PATH=BUCKET,
// PATH=BUCKET/PREFIX (a "/" is added to a prefix without one), and a
// mode after the last ':' (ro, the default; rw; rw,overwrite; rw,delete).
// The SDK checks the rest (paths, names, at most four).
func parseMounts(values []string) (map[string]rayito.S3Mount, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]rayito.S3Mount{}
	for _, v := range values {
		path, src, ok := strings.Cut(v, "=")
		if !ok || path == "" || src == "" {
			return nil, errMountFlag
		}
		var m rayito.S3Mount
		if i := strings.LastIndexByte(src, ':'); i >= 0 {
			mode := src[i+1:]
			src = src[:i]
			for _, f := range strings.Split(mode, ",") {
				switch f {
				case "ro":
				case "rw":
					m.Writable = true
				case "overwrite":
					m.AllowOverwrite = true
				case "delete":
					m.AllowDelete = true
				default:
					return nil, errMountFlag
				}
			}
			if (m.AllowOverwrite || m.AllowDelete) && !m.Writable {
				return nil, errors.New("--mount: overwrite and delete need rw")
			}
		}
		bucket, prefix, _ := strings.Cut(src, "/")
		if bucket == "" {
			return nil, errMountFlag
		}
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		m.Bucket, m.Prefix = bucket, prefix
		if _, dup := out[path]; dup {
			return nil, errors.New("--mount: the same path twice")
		}
		out[path] = m
	}
	return out, nil
}
