module github.com/rayito-dev/rayito/rayd

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/rayito-dev/rayito/proto v0.1.0
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)
