package forwarder

import (
	"context"
	"io"
	"log/slog"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/store"
)

// FuzzProcess: any batch (its data as a subscription sends it) and any
// stream name are counted, never a panic, and nothing is admitted without
// a valid MAC.
func FuzzProcess(f *testing.F) {
	f.Add(gz(`{"messageType":"DATA_MESSAGE","logStream":"a/sbx","logEvents":[{"id":"1","timestamp":1,"message":"rayito.event.v1 e30 AAAA"}]}`), "a/sbx", "rayito.event.v1 e30 AAAA")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, data, stream, msg string) {
		fw := &Forwarder{Keys: staticKey(stackKey), Store: store.NewMemory(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		_, _ = fw.Handle(context.Background(), lambdaevents.CloudwatchLogsEvent{AWSLogs: lambdaevents.CloudwatchLogsRawData{Data: data}})
		_, _ = SandboxFromStream(stream)
		s, err := fw.Process(context.Background(), lambdaevents.CloudwatchLogsData{LogStream: stream, LogEvents: []lambdaevents.CloudwatchLogsLogEvent{{Message: msg}}})
		if err != nil || s.Admitted != 0 {
			t.Fatalf("%+v %v", s, err)
		}
	})
}
