module github.com/rayito-dev/rayito/rayd

go 1.26.0

require (
	connectrpc.com/connect v1.21.1 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
