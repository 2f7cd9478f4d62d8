module github.com/rayito-dev/rayito/proto

go 1.26.8
