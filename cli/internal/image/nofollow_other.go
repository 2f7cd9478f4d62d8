//go:build !unix

package image

import "os"

func openNoFollow(p string) (*os.File, error) { return os.Open(p) }

func isLoop(error) bool { return false }
