module github.com/rayito-dev/rayito/bench

go 1.26
