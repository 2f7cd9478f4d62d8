package microvmsapi

import (
	"errors"
	"strings"
	"testing"
)

// CheckRun: the one rule of a RunMicrovm input, at each bound.
func TestCheckRun(t *testing.T) {
	ok := func() *RunMicrovmInput { return &RunMicrovmInput{ImageIdentifier: "img"} }
	for _, tc := range []struct {
		name string
		edit func(*RunMicrovmInput)
		want string // "" valid; else the message's start
	}{
		{"minimal", func(*RunMicrovmInput) {}, ""},
		{"no image", func(in *RunMicrovmInput) { in.ImageIdentifier = "" }, "imageIdentifier is required"},
		{"long image", func(in *RunMicrovmInput) { in.ImageIdentifier = strings.Repeat("i", 2049) }, "imageIdentifier must be at most 2048"},
		{"long version", func(in *RunMicrovmInput) { in.ImageVersion = strings.Repeat("v", 129) }, "imageVersion"},
		{"long role", func(in *RunMicrovmInput) { in.ExecutionRoleArn = strings.Repeat("r", 2049) }, "executionRoleArn"},
		{"payload at the limit", func(in *RunMicrovmInput) { in.RunHookPayload = strings.Repeat("é", MaxRunHookPayload) }, ""},
		{"payload over", func(in *RunMicrovmInput) { in.RunHookPayload = strings.Repeat("a", MaxRunHookPayload+1) }, "runHookPayload must be at most"},
		{"payload not UTF-8", func(in *RunMicrovmInput) { in.RunHookPayload = "\xff" }, "runHookPayload must be valid UTF-8"},
		{"duration 0 (the maximum)", func(in *RunMicrovmInput) { in.MaximumDurationInSeconds = 0 }, ""},
		{"duration 1", func(in *RunMicrovmInput) { in.MaximumDurationInSeconds = 1 }, ""},
		{"duration max", func(in *RunMicrovmInput) { in.MaximumDurationInSeconds = MaxDurationSeconds }, ""},
		{"duration over", func(in *RunMicrovmInput) { in.MaximumDurationInSeconds = MaxDurationSeconds + 1 }, "maximumDurationInSeconds must be between 1 and 28800"},
		{"duration negative", func(in *RunMicrovmInput) { in.MaximumDurationInSeconds = -1 }, "maximumDurationInSeconds"},
		{"connectors at the limit", func(in *RunMicrovmInput) { in.EgressNetworkConnectors = make([]string, MaxConnectors) }, ""},
		{"ingress over", func(in *RunMicrovmInput) { in.IngressNetworkConnectors = make([]string, MaxConnectors+1) }, "ingressNetworkConnectors"},
		{"egress over", func(in *RunMicrovmInput) { in.EgressNetworkConnectors = make([]string, MaxConnectors+1) }, "egressNetworkConnectors"},
		{"idle ok", func(in *RunMicrovmInput) { in.IdlePolicy = &IdlePolicy{MaxIdleDurationSeconds: 60} }, ""},
		{"idle short", func(in *RunMicrovmInput) { in.IdlePolicy = &IdlePolicy{MaxIdleDurationSeconds: 59} }, "idlePolicy.maxIdleDurationSeconds must be between 60 and 28800"},
		{"idle long", func(in *RunMicrovmInput) { in.IdlePolicy = &IdlePolicy{MaxIdleDurationSeconds: MaxDurationSeconds + 1} }, "idlePolicy.maxIdleDurationSeconds"},
		{"suspended negative", func(in *RunMicrovmInput) {
			in.IdlePolicy = &IdlePolicy{MaxIdleDurationSeconds: 60, SuspendedDurationSeconds: -1}
		}, "idlePolicy.suspendedDurationSeconds"},
		{"suspended long", func(in *RunMicrovmInput) {
			in.IdlePolicy = &IdlePolicy{MaxIdleDurationSeconds: 60, SuspendedDurationSeconds: MaxDurationSeconds + 1}
		}, "idlePolicy.suspendedDurationSeconds"},
		{"logging both", func(in *RunMicrovmInput) {
			in.Logging = &Logging{Disabled: &struct{}{}, CloudWatch: &CloudWatchLogging{LogGroup: "/g"}}
		}, "logging must set exactly one"},
		{"logging none", func(in *RunMicrovmInput) { in.Logging = &Logging{} }, "logging must set exactly one"},
		{"log group empty", func(in *RunMicrovmInput) { in.Logging = &Logging{CloudWatch: &CloudWatchLogging{}} }, "logging.cloudWatch.logGroup"},
		{"log group long", func(in *RunMicrovmInput) {
			in.Logging = &Logging{CloudWatch: &CloudWatchLogging{LogGroup: strings.Repeat("g", 513)}}
		}, "logging.cloudWatch.logGroup must be 1 to 512"},
		{"token ok", func(in *RunMicrovmInput) { in.ClientToken = strings.Repeat("t", MaxClientTokenLen) }, ""},
		{"token long", func(in *RunMicrovmInput) { in.ClientToken = strings.Repeat("t", MaxClientTokenLen+1) }, "clientToken must be at most"},
		{"token space", func(in *RunMicrovmInput) { in.ClientToken = "a b" }, "clientToken must be printable ASCII"},
	} {
		in := ok()
		tc.edit(in)
		err := CheckRun(in)
		var ie *InvalidInputError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &ie) || !strings.HasPrefix(ie.Message, tc.want)):
			t.Errorf("%s: %v, want %q...", tc.name, err, tc.want)
		case err != nil && (strings.Contains(err.Error(), "\xff") || strings.Contains(err.Error(), "ttt")):
			t.Errorf("%s: the message quotes the value: %q", tc.name, err)
		}
	}
	if err := CheckRun(nil); err == nil {
		t.Error("a nil input passed")
	}
}
