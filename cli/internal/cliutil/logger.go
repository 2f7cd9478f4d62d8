package cliutil

import (
	"io"
	"log/slog"
)

// ServerLogger is the logger of a command that serves (local serve, e2b
// serve): text records on w at info level, debug with debug, JSON records
// with asJSON.
func ServerLogger(w io.Writer, debug, asJSON bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
