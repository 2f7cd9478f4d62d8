module github.com/rayito-dev/rayito/dashboard

go 1.26.0
