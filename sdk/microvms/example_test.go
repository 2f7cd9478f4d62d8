package microvms_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// Launch a microVM on a local localvm.
func Example() {
	ctx := context.Background()
	c, err := microvms.New("http://127.0.0.1:7450", microvms.Unsigned())
	if err != nil {
		panic(err)
	}
	vm, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{
		ImageIdentifier: "arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
		Logging:         &microvmsapi.Logging{Disabled: &struct{}{}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(vm.MicrovmID, vm.State)
}

// Talk to AWS with the usual AWS configuration (environment, profile, SSO,
// instance role).
func ExampleNewFromConfig() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		panic(err)
	}
	c, err := microvms.NewFromConfig(cfg)
	if err != nil {
		panic(err)
	}
	_, err = c.GetMicrovm(ctx, "microvm-0123")
	switch {
	case errors.Is(err, microvms.ErrNotFound):
		fmt.Println("gone")
	case errors.Is(err, microvms.ErrAuthentication):
		fmt.Println("check your AWS credentials")
	case err != nil:
		panic(err)
	}
}

func ExampleClient_ListAll() {
	ctx := context.Background()
	c, err := microvms.New("http://127.0.0.1:7450", microvms.Unsigned())
	if err != nil {
		panic(err)
	}
	for vm, err := range c.ListAll(ctx, microvms.ListInput{MaxResults: 50}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(vm.MicrovmID, vm.State)
	}
}

func ExampleClient_CreateMicrovmAuthToken() {
	ctx := context.Background()
	c, err := microvms.New("http://127.0.0.1:7450", microvms.Unsigned())
	if err != nil {
		panic(err)
	}
	port := microvmsapi.DefaultProxyPort
	token, err := c.CreateMicrovmAuthToken(ctx, "microvm-0123", &microvmsapi.CreateMicrovmAuthTokenInput{
		ExpirationInMinutes: 60,
		AllowedPorts:        []microvmsapi.AllowedPort{{Port: &port}},
	})
	if err != nil {
		panic(err)
	}
	_ = token // send as the x-aws-proxy-auth header to the microVM's endpoint
}

func ExampleAPIError() {
	var err error = &microvms.APIError{
		Kind:       microvms.KindQuotaExceeded,
		Operation:  "RunMicrovm",
		StatusCode: 402,
		Exception:  "ServiceQuotaExceededException",
	}
	var ae *microvms.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.Kind, errors.Is(err, microvms.ErrQuotaExceeded))
	}
	fmt.Println(err)
	// Output:
	// quota exceeded true
	// microvms: RunMicrovm: quota exceeded (ServiceQuotaExceededException, 402)
}
