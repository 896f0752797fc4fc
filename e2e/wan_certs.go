package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// TLSCreds are one node's TLS credentials as PEM: the CA its peers must chain to, its
// certificate and its key (the files confluxd reads from CONFLUX_TLS_CA, _CERT, _KEY).
type TLSCreds struct {
	CA, Cert, Key []byte
}

// certAuthority is a CA made for one test run.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)) }

// newCA makes a self-signed CA (ECDSA P-256) valid for a day.
func newCA(name string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: name, Organization: []string{"conflux-e2e"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue makes a certificate for a node that both accepts and dials links (serverAuth and
// clientAuth), and returns it with the CA that peers must trust (trust; nil: this CA).
func (ca *certAuthority) issue(name string, trust *certAuthority) (TLSCreds, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSCreds{}, err
	}
	sn, err := serial()
	if err != nil {
		return TLSCreds{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: name, Organization: []string{"conflux-e2e"}},
		DNSNames:  []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return TLSCreds{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return TLSCreds{}, err
	}
	if trust == nil {
		trust = ca
	}
	return TLSCreds{
		CA:   trust.pem,
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, nil
}

// SecretManifest is a Secret holding creds as ca.pem, cert.pem and key.pem.
func (c TLSCreds) SecretManifest(ns, name string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata":   map[string]string{"name": name, "namespace": ns},
		"stringData": map[string]string{"ca.pem": string(c.CA), "cert.pem": string(c.Cert), "key.pem": string(c.Key)},
	})
	return string(b)
}
