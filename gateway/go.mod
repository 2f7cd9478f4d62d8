module github.com/rayito-dev/rayito/gateway

go 1.26.0
