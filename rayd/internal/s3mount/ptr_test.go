package s3mount

func ptr[T any](v T) *T { return &v }
