// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

func admissionregistrationv1ParamKind() admissionregistrationv1.ParamKind {
	return admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
}

func admissionregistrationv1ParamRef() admissionregistrationv1.ParamRef {
	return admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"}
}
