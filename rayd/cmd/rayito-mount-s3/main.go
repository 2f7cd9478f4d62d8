// Command rayito-mount-s3 is rayito's S3 mount helper (package mounts3):
// rayd starts it, as its own user, to serve one S3 mount over a FUSE
// descriptor rayd mounted.
package main

import (
	"os"

	"github.com/rayito-dev/rayito/rayd/mounts3"
)

func main() { os.Exit(mounts3.Main(os.Args[1:], os.Stderr)) }
