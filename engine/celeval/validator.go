// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package celeval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	celgo "github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// The decision vocabulary is the API server's (package validating's
// PolicyDecision and PolicyAuditAnnotation), so results convert one to one.
// kyvap does not import that package into the manager: it links the whole
// admission plugin (informers, gRPC, OpenTelemetry) and costs the operator
// about 10 MiB of resident memory for four small types.

// Action is what a decision does to the request.
type Action string

// Evaluation is how a validation evaluated.
type Evaluation string

// AuditAnnotationAction is what becomes of an audit annotation.
type AuditAnnotationAction string

// The values, spelled as in the API server.
const (
	ActionAdmit Action = "admit"
	ActionDeny  Action = "deny"

	EvalAdmit Evaluation = "admit"
	EvalError Evaluation = "error"
	EvalDeny  Evaluation = "deny"

	AuditAnnotationActionPublish AuditAnnotationAction = "publish"
	AuditAnnotationActionError   AuditAnnotationAction = "error"
	AuditAnnotationActionExclude AuditAnnotationAction = "exclude"
)

// Decision is one validation's verdict.
type Decision struct {
	Action     Action
	Evaluation Evaluation
	Message    string
	Reason     metav1.StatusReason
	Elapsed    time.Duration
}

// AuditAnnotation is one audit annotation's value.
type AuditAnnotation struct {
	Key     string
	Value   string
	Elapsed time.Duration
	Action  AuditAnnotationAction
	Error   string
}

// Result is an evaluation's decisions (one per validation) and audit
// annotations. Both are empty when a match condition excluded the request,
// and so are they for a spec without validations: Excluded tells the two
// apart.
type Result struct {
	Decisions        []Decision
	AuditAnnotations []AuditAnnotation
	// Excluded: a match condition was false, nothing was evaluated.
	Excluded bool
	// Interrupted: the context ended (deadline or cancellation) while the
	// program ran, and something in the result may be an interruption
	// rather than the expression's own outcome (an error, or an exclusion
	// that an interrupted match condition caused under failurePolicy
	// Ignore). The result is then no verdict; callers answer the request
	// as out of time. A result without errors is complete even when the
	// context ended: every expression ran to its end.
	Interrupted bool
}

// markInterrupted sets Interrupted when ctx ended and the result depends
// on something that may have been cut short. cel-go checks the context
// every celconfig.CheckFrequency iterations of a comprehension (the API
// server compiles every program with cel.InterruptCheckFrequency) and the
// evaluator flattens the interruption into an error string, so the
// context is what tells an interruption from an expression's own error.
func markInterrupted(ctx context.Context, r Result) Result {
	if ctx.Err() == nil {
		return r
	}
	if r.Excluded {
		r.Interrupted = true
		return r
	}
	for _, d := range r.Decisions {
		if d.Evaluation == EvalError {
			r.Interrupted = true
			return r
		}
	}
	for _, a := range r.AuditAnnotations {
		if a.Error != "" {
			r.Interrupted = true
			return r
		}
	}
	return r
}

// The expression kinds of a policy, as compiler inputs.

type validationCondition struct {
	Expression string
	Message    string
	Reason     *metav1.StatusReason
}

func (v *validationCondition) GetExpression() string      { return v.Expression }
func (v *validationCondition) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.BoolType} }

type messageCondition struct{ MessageExpression string }

func (m *messageCondition) GetExpression() string      { return m.MessageExpression }
func (m *messageCondition) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.StringType} }

type auditAnnotationCondition struct {
	Key             string
	ValueExpression string
}

func (a *auditAnnotationCondition) GetExpression() string { return a.ValueExpression }
func (a *auditAnnotationCondition) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{celgo.StringType, celgo.NullType}
}

type variable struct{ Name, Expression string }

func (v *variable) GetExpression() string      { return v.Expression }
func (v *variable) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.AnyType, celgo.DynType} }
func (v *variable) GetName() string            { return v.Name }

// validator turns the compiled evaluators' results into decisions with the
// API server's rules (k8s.io/apiserver's validating.validator, v0.37):
// match conditions first; an evaluation error follows the failure policy;
// a false validation denies with messageExpression's result when it is a
// non-blank single-line string within the size limit, else the message,
// else "failed expression: <expression>"; audit annotations publish
// non-blank strings and exclude null.
type validator struct {
	matcher       matchconditions.Matcher
	validations   plugincel.ConditionEvaluator
	messages      plugincel.ConditionEvaluator
	annotations   plugincel.ConditionEvaluator
	failurePolicy admissionregistrationv1.FailurePolicyType
}

func (v *validator) errorAction() Action {
	if v.failurePolicy == admissionregistrationv1.Ignore {
		return ActionAdmit
	}
	return ActionDeny
}

func (v *validator) annotationErrorAction() AuditAnnotationAction {
	if v.failurePolicy == admissionregistrationv1.Ignore {
		return AuditAnnotationActionExclude
	}
	return AuditAnnotationActionError
}

func (v *validator) failure(message string) Result {
	return Result{Decisions: []Decision{{Action: v.errorAction(), Evaluation: EvalError, Message: message}}}
}

func (v *validator) validate(ctx context.Context, in Input, authz authorizerLike) Result {
	if v.matcher != nil {
		m := v.matcher.Match(ctx, in.Attributes, in.Params, authz)
		if m.Error != nil {
			return v.failure(m.Error.Error())
		}
		if !m.Matches {
			return Result{Excluded: true}
		}
	}
	withAuthz := plugincel.OptionalVariableBindings{VersionedParams: in.Params, Authorizer: authz}
	withoutAuthz := plugincel.OptionalVariableBindings{VersionedParams: in.Params}
	request := plugincel.CreateAdmissionRequest(in.Attributes.Attributes, metav1.GroupVersionResource(in.MatchedResource), metav1.GroupVersionKind(in.Attributes.VersionedKind))
	namespace := plugincel.CreateNamespaceObject(in.Namespace)

	results, remaining, err := v.validations.ForInput(ctx, in.Attributes, request, withAuthz, namespace, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return v.failure(err.Error())
	}
	messages, _, messagesErr := v.messages.ForInput(ctx, in.Attributes, request, withoutAuthz, namespace, remaining)
	decisions := make([]Decision, len(results))
	for i, r := range results {
		d := &decisions[i]
		d.Elapsed = r.Elapsed
		condition, ok := r.ExpressionAccessor.(*validationCondition)
		switch {
		case !ok:
			d.Action, d.Evaluation, d.Message = v.errorAction(), EvalError, "Invalid type sent to validator, expected ValidationCondition"
		case r.Error != nil:
			d.Action, d.Evaluation, d.Message = v.errorAction(), EvalError, r.Error.Error()
		case errors.Is(messagesErr, apiservercel.ErrInternal) || errors.Is(messagesErr, apiservercel.ErrOutOfBudget):
			d.Action, d.Evaluation, d.Message = v.errorAction(), EvalError, fmt.Sprintf("failed messageExpression: %s", messagesErr)
		case r.EvalResult != celtypes.True:
			d.Action, d.Evaluation = ActionDeny, EvalDeny
			d.Reason = metav1.StatusReasonInvalid
			if condition.Reason != nil {
				d.Reason = *condition.Reason
			}
			var message *plugincel.EvaluationResult
			if i < len(messages) {
				message = &messages[i]
			}
			d.Message = denialMessage(condition, message)
		default:
			d.Action, d.Evaluation = ActionAdmit, EvalAdmit
		}
	}

	annotationResults, _, err := v.annotations.ForInput(ctx, in.Attributes, request, withoutAuthz, namespace, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return v.failure(err.Error())
	}
	annotations := make([]AuditAnnotation, len(annotationResults))
	for i, r := range annotationResults {
		if r.ExpressionAccessor == nil {
			continue
		}
		a := &annotations[i]
		a.Elapsed = r.Elapsed
		condition, ok := r.ExpressionAccessor.(*auditAnnotationCondition)
		if !ok {
			a.Action, a.Error = v.annotationErrorAction(), fmt.Sprintf("Invalid type sent to validator, expected AuditAnnotationCondition but got %T", r.ExpressionAccessor)
			continue
		}
		a.Key = condition.Key
		if r.Error != nil {
			a.Action, a.Error = v.annotationErrorAction(), r.Error.Error()
			continue
		}
		switch r.EvalResult.Type() {
		case celtypes.StringType:
			if value := strings.TrimSpace(r.EvalResult.Value().(string)); value != "" {
				a.Action, a.Value = AuditAnnotationActionPublish, value
			} else {
				a.Action = AuditAnnotationActionExclude
			}
		case celtypes.NullType:
			a.Action = AuditAnnotationActionExclude
		default:
			a.Action = AuditAnnotationActionError
			a.Error = fmt.Sprintf("valueExpression '%v' resulted in unsupported return type: %v. Return type must be either string or null.", condition.ValueExpression, r.EvalResult.Type())
		}
	}
	return Result{Decisions: decisions, AuditAnnotations: annotations}
}

// denialMessage picks a failed validation's message as the API server does.
func denialMessage(condition *validationCondition, message *plugincel.EvaluationResult) string {
	text := ""
	if message != nil && message.Error == nil && message.EvalResult != nil {
		if s, ok := message.EvalResult.Value().(string); ok {
			s = strings.TrimSpace(s)
			if len(s) <= celconfig.MaxEvaluatedMessageExpressionSizeBytes && !strings.Contains(s, "\n") {
				text = s
			}
		}
	}
	if text == "" {
		text = strings.TrimSpace(condition.Message)
	}
	if text == "" {
		text = fmt.Sprintf("failed expression: %v", strings.TrimSpace(condition.Expression))
	}
	return text
}
