module github.com/rayito-dev/rayito/cli

go 1.26.0

require (
	github.com/urfave/cli/v3 v3.14.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
)
