// Package template builds rayito templates on the client: an immutable
// builder (FromBaseImage, Copy, RunCmd, PipInstall, SetEnvs, Workdir,
// SetUser, SetStartCmd) or a strict Dockerfile subset (FromDockerfile),
// compiled by Compile into an Artifact: a deterministic zip holding the
// template as a Dockerfile layer, its build spec (proto/template's Spec,
// what the local platform builds) and the files its Copy steps name.
//
// # Copying files
//
// Copy sources are paths relative to the build context directory given to
// Compile. The context's .dockerignore applies with Docker's semantics
// (github.com/moby/patternmatcher, the matcher Docker itself uses): a
// pattern matches paths relative to the context root, "**/.env" also
// matches the root ".env", '!' re-includes, a directory pattern excludes
// what is under it, and the Dockerfile and .dockerignore are ordinary
// files that the patterns may exclude.
//
// Compile never follows a symbolic link. The context is opened as an
// os.Root, every path component is checked with Lstat before it is opened
// and the opened file is checked to be the one that was checked, so a link
// in a parent component (or one swapped in during the walk) cannot take
// the walk outside the context. A link inside a copied directory is stored
// as a link (its target as the entry's content) only when its target is
// relative and stays inside the copied tree; any other link, and any
// device, fifo or socket, fails the compile with a typed error.
//
// Before it packages a file that commonly holds a secret (".env",
// ".env.*", "*.pem", "*.key", anything under ".git/", ".aws/" or ".ssh/")
// Compile warns, naming the path relative to the context (WithWarn,
// WithLogger), and lists the warning in Artifact.Warnings: any code in a
// sandbox of the template can read what the template copies.
//
// # The artifact
//
// The zip is deterministic: entries sorted by name, every time 1980-01-01
// 00:00, modes 0644 (0755 for directories and files with an execute bit),
// no extra fields, Deflate at level 6. The same inputs give the same
// SHA256 on any machine built with the same Go release (compress/flate's
// output is stable in practice but not promised across Go releases).
// A zip of at most the spill threshold (WithSpillThreshold, default 64 MiB)
// is held in Artifact.Zip; a larger one is written to a 0600 temporary
// file named by Artifact.Path, which Artifact.Close removes.
//
// # Errors
//
// Builder mistakes are collected and returned together by Compile: each
// is a *Error naming the step index and the field (never the value) and
// matches ErrInvalidTemplate. FromDockerfile's errors name the line and
// the instruction and match ErrDockerfile. Compile's context errors match
// ErrContextPath, ErrUnsafeSymlink, ErrSpecialFile or ErrContextTooLarge.
//
// Building the template (on AWS or on the local platform) is not part of
// this package: it prepares the artifact that a build takes.
package template
