package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SpecHashAnnotation on an object the operator owns is the hash of the state the operator
// last wrote. The operator rewrites the object only when the state it wants has another
// hash: an unchanged child costs no write (the API server's defaults would otherwise make
// every comparison differ), and a hand edit of the child persists until its parent changes.
const SpecHashAnnotation = "conflux.dev/spec-hash"

// applyOwned creates the object named by key or brings it to what mutate makes of it.
// fresh returns an empty object of the kind; mutate must set the same fields whatever it
// is given (it sees a fresh object, zero CreationTimestamp, for the hash and the create).
// It returns the object as it is now and whether it wrote.
func applyOwned[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, fresh func() T, mutate func(T) error) (T, bool, error) {
	desired := fresh()
	desired.SetNamespace(key.Namespace)
	desired.SetName(key.Name)
	if err := mutate(desired); err != nil {
		return desired, false, err
	}
	hash, err := specHash(desired)
	if err != nil {
		return desired, false, err
	}
	cur := fresh()
	switch err := c.Get(ctx, key, cur); {
	case apierrors.IsNotFound(err):
		setAnnotation(desired, SpecHashAnnotation, hash)
		if err := c.Create(ctx, desired); err != nil {
			return desired, false, err
		}
		return desired, true, nil
	case err != nil:
		return cur, false, err
	case cur.GetAnnotations()[SpecHashAnnotation] == hash:
		return cur, false, nil
	}
	if err := mutate(cur); err != nil {
		return cur, false, err
	}
	setAnnotation(cur, SpecHashAnnotation, hash)
	if err := c.Update(ctx, cur); err != nil {
		return cur, false, err
	}
	return cur, true, nil
}

// specHash is the SHA-256 of obj as JSON (the operator's desired state, before the API
// server defaults it).
func specHash(obj client.Object) (string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

func setAnnotation(obj client.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}
