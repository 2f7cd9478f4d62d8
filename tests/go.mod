module github.com/rayito-dev/rayito/tests

go 1.26
