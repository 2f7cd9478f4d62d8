// Package infra holds Rayito's CloudFormation templates (iam.yaml) and the
// tests that prove their least privilege. It has no code of its own: the
// template is the product, iam_test.go is its checker.
package infra
