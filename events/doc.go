// Package events is the root of the events module: the three Lambdas of
// the events-webhooks stack (cmd/forwarder, cmd/deliverer,
// cmd/reconciler) and the logic they share under internal/ (the
// forwarder's admission of signed lifecycle event lines, the store of
// events, claims and webhooks, the webhook deliverer and the reconciler
// of sandboxes gone without a killed event), and package local, the same
// forwarder and deliverer in one process over a file-backed store, which
// the local platform runs.
package events
