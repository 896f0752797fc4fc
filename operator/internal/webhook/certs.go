package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Keys of the certificate Secret (the kubernetes.io/tls layout plus the CA).
const (
	CACertKey  = "ca.crt"
	TLSCertKey = corev1.TLSCertKey
	TLSKeyKey  = corev1.TLSPrivateKeyKey
)

// CertOptions says where the webhook serving certificate lives and who trusts it.
type CertOptions struct {
	// Namespace and SecretName of the Secret holding ca.crt, tls.crt and tls.key.
	Namespace, SecretName string
	// ServiceName of the webhook Service; the certificate is for <svc>.<ns>.svc.
	ServiceName string
	// CertDir is where tls.crt and tls.key are written for the webhook server.
	CertDir string
	// MutatingConfigs and ValidatingConfigs are the webhook configurations whose caBundle
	// is set to the CA; missing ones are skipped.
	MutatingConfigs, ValidatingConfigs []string
	// Validity of the serving certificate; it is renewed at start when less than a third is left.
	Validity time.Duration
}

// EnsureCerts makes sure a valid self-signed CA and serving certificate exist in the Secret
// (creating or renewing them), writes the serving pair to CertDir and patches the CA into
// the webhook configurations. Every replica runs it at start; the Secret is the one source.
func EnsureCerts(ctx context.Context, c client.Client, o CertOptions) error {
	if o.Validity == 0 {
		o.Validity = 365 * 24 * time.Hour
	}
	log := logf.FromContext(ctx).WithName("certs")
	dns := []string{o.ServiceName, o.ServiceName + "." + o.Namespace, o.ServiceName + "." + o.Namespace + ".svc",
		o.ServiceName + "." + o.Namespace + ".svc.cluster.local"}

	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.SecretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
		data, gerr := generate(dns, o.Validity)
		if gerr != nil {
			return gerr
		}
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: o.SecretName, Namespace: o.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "conflux-operator"}},
			Type: corev1.SecretTypeTLS, Data: data}
		if err := c.Create(ctx, secret); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating secret %s: %w", o.SecretName, err)
			}
			// Another replica won the race: use its certificate.
			if err := c.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
				return err
			}
		}
		log.Info("generated webhook serving certificate", "secret", o.SecretName)
	case err != nil:
		return fmt.Errorf("getting secret %s: %w", o.SecretName, err)
	default:
		if verr := Verify(secret.Data, dns[2], time.Now().Add(o.Validity/3)); verr != nil {
			log.Info("renewing webhook serving certificate", "reason", verr.Error())
			data, gerr := generate(dns, o.Validity)
			if gerr != nil {
				return gerr
			}
			secret.Data = data
			if err := c.Update(ctx, secret); err != nil {
				return fmt.Errorf("updating secret %s: %w", o.SecretName, err)
			}
		}
	}

	if o.CertDir != "" {
		if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
			return err
		}
		for _, k := range []string{TLSCertKey, TLSKeyKey} {
			if err := os.WriteFile(filepath.Join(o.CertDir, k), secret.Data[k], 0o600); err != nil {
				return err
			}
		}
	}
	return PatchCABundle(ctx, c, secret.Data[CACertKey], o.MutatingConfigs, o.ValidatingConfigs)
}

// PatchCABundle sets caBundle on every webhook of the named configurations. A
// configuration that does not exist (yet) is skipped.
func PatchCABundle(ctx context.Context, c client.Client, ca []byte, mutating, validating []string) error {
	for _, name := range mutating {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := patchWebhookConfig(ctx, c, name, cfg, func() {
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig.CABundle = ca
			}
		}); err != nil {
			return err
		}
	}
	for _, name := range validating {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := patchWebhookConfig(ctx, c, name, cfg, func() {
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig.CABundle = ca
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// patchWebhookConfig reads the named configuration into cfg, applies set to it and patches
// the difference; a missing configuration is not an error.
func patchWebhookConfig(ctx context.Context, c client.Client, name string, cfg client.Object, set func()) error {
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	base := cfg.DeepCopyObject().(client.Object)
	set()
	if err := c.Patch(ctx, cfg, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("patching %s: %w", name, err)
	}
	return nil
}

// Verify checks that data holds a CA and a serving pair, that the serving certificate is
// signed by the CA, valid for dnsName and still valid at notAfter.
func Verify(data map[string][]byte, dnsName string, notAfter time.Time) error {
	caBlock, _ := pem.Decode(data[CACertKey])
	certBlock, _ := pem.Decode(data[TLSCertKey])
	keyBlock, _ := pem.Decode(data[TLSKeyKey])
	if caBlock == nil || certBlock == nil || keyBlock == nil {
		return errors.New("missing or malformed ca.crt, tls.crt or tls.key")
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		return err
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return errors.New("tls.key does not match tls.crt")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, CurrentTime: notAfter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return err
	}
	return nil
}

// generate makes a CA (valid 10 years) and a serving certificate for dns signed by it.
func generate(dns []string, validity time.Duration) (map[string][]byte, error) {
	now := time.Now().Add(-5 * time.Minute)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "conflux-webhook-ca"},
		NotBefore: now, NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: dns[len(dns)-2]}, DNSNames: dns,
		NotBefore: now, NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	enc := func(typ string, b []byte) []byte {
		var buf bytes.Buffer
		_ = pem.Encode(&buf, &pem.Block{Type: typ, Bytes: b})
		return buf.Bytes()
	}
	return map[string][]byte{
		CACertKey:  enc("CERTIFICATE", caDER),
		TLSCertKey: enc("CERTIFICATE", der),
		TLSKeyKey:  enc("EC PRIVATE KEY", keyDER),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
