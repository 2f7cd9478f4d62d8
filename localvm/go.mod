module github.com/rayito-dev/rayito/localvm

go 1.26.0

require (
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/google/nftables v0.3.0
	github.com/google/uuid v1.6.0
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42
	github.com/rayito-dev/rayito/gateway v0.1.0
	github.com/rayito-dev/rayito/proto v0.1.0
	github.com/rayito-dev/rayito/rayd v0.1.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/net v0.33.0
	golang.org/x/sys v0.50.0
)

require (
	connectrpc.com/connect v1.21.1 // indirect
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	github.com/go-zeromq/zmq4 v0.17.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/socket v0.5.0 // indirect
	github.com/valyala/fastjson v1.6.10 // indirect
	golang.org/x/sync v0.10.0 // indirect
	golang.org/x/text v0.21.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
