// Package webhook is kyvap's own CEL admission webhook: it enforces, with the
// verdicts a ValidatingAdmissionPolicy would give, the rules translate/ could
// not express as VAPs.
package webhook
