package microvmsapi

import (
	"archive/zip"
	"io"
	"strings"
)

// MaxCodeArtifactBytes bounds an image's code artifact (the zip a
// MicroVMs image is built from).
const MaxCodeArtifactBytes = 10 << 30

// CheckCodeArtifact checks an image's code artifact read from r (size
// bytes): a zip archive of at most MaxCodeArtifactBytes with a regular
// Dockerfile at its root and no entry whose name is absolute, holds a
// backslash or NUL, or has an empty, "." or ".." element. Anything else
// is an *InvalidInputError that quotes no entry name. `rayito image
// publish --zip` and the CDK construct RayitoMicrovmImage share it.
func CheckCodeArtifact(r io.ReaderAt, size int64) error {
	if size <= 0 || size > MaxCodeArtifactBytes {
		return invalidf("the image artifact must be a zip of 1 to %d bytes.", int64(MaxCodeArtifactBytes))
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return invalidf("the image artifact is not a zip archive.")
	}
	dockerfile := false
	for _, f := range zr.File {
		name := f.Name
		if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.IndexByte(name, 0) >= 0 {
			return invalidf("the image artifact has an entry with an absolute or malformed name.")
		}
		for _, el := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
			if el == ".." || el == "." || el == "" {
				return invalidf("the image artifact has an entry that climbs out of it.")
			}
		}
		if name == "Dockerfile" && f.Mode().IsRegular() {
			dockerfile = true
		}
	}
	if !dockerfile {
		return invalidf("the image artifact has no Dockerfile at its root.")
	}
	return nil
}
