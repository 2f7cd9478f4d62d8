module github.com/rayito-dev/rayito/rayd

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/go-zeromq/zmq4 v0.17.0
	github.com/rayito-dev/rayito/proto v0.1.0
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	github.com/valyala/fastjson v1.6.10
	golang.org/x/sync v0.7.0 // indirect
	golang.org/x/text v0.15.0 // indirect
)
