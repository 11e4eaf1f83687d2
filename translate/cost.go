package translate

import "time"

// WebhookEvaluationBudget is how long kyvap's webhook works on one request
// sent to a configured webhook with the given timeoutSeconds: the timeout
// less a margin for what happens outside the handler (the API server's
// call, TLS, decoding the review and encoding the answer), a fifth of the
// timeout but at least 200 ms and at most 2 s (1 s → 800 ms, 10 s → 8 s,
// 30 s → 28 s). After it, the webhook answers as the webhook's
// failurePolicy says instead of letting the API server's call time out.
func WebhookEvaluationBudget(timeoutSeconds int32) time.Duration {
	timeout := time.Duration(min(max(timeoutSeconds, 1), 30)) * time.Second
	margin := min(max(timeout/5, 200*time.Millisecond), 2*time.Second)
	return timeout - margin
}
