module github.com/rayito-dev/rayito/rayd

go 1.26.8
