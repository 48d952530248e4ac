// SPDX-License-Identifier: Apache-2.0
//
// A CRD conversion webhook for MyResource written the way a Go operator
// (controller-runtime) does it, standard library only: net/http over TLS,
// encoding/json into typed structs. scripts/bench-peers.sh runs it next to
// kop and a Node.js peer with the same certificate and the same bodies.
//
//	peer-go -cert-dir DIR [-host 127.0.0.1] [-port 0]
//
// Serves POST /convert; prints "listening on PORT" once it accepts.
//
// What it does per review, as controller-runtime's conversion webhook:
// decode the ConversionReview with the objects kept raw, then for every
// object peek at its TypeMeta, decode it into the typed MyResource of that
// version, convert, and encode it again. metadata is typed as metav1.ObjectMeta;
// a raw scan of the object (no decoding) tells whether re-encoding it gives
// the input back, and when it would not (a member ObjectMeta does not know,
// an empty map that omitempty would drop) the metadata members are carried
// over as raw JSON with only the annotations replaced. spec and status
// are typed by the CRD schema (the apiserver prunes unknown fields there,
// so nothing is lost). Converts v1 -> v2 (with the
// mygroup.example.com/v2-extras annotation restored, docs/api.md §2.4); an object
// already in the desired version is returned unchanged; v2 -> v1 is not
// implemented here and answers Failure.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	groupV1          = "mygroup.example.com/v1"
	groupV2          = "mygroup.example.com/v2"
	kindMyResource   = "MyResource"
	extrasAnnotation = "mygroup.example.com/v2-extras"
	maxBodyBytes     = 64 << 20
)

// ---- ConversionReview (apiextensions.k8s.io/v1 and v1beta1) ----------------

type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

type ConversionReview struct {
	TypeMeta `json:",inline"`
	Request  *ConversionRequest  `json:"request,omitempty"`
	Response *ConversionResponse `json:"response,omitempty"`
}

type ConversionRequest struct {
	UID               string            `json:"uid"`
	DesiredAPIVersion string            `json:"desiredAPIVersion"`
	Objects           []json.RawMessage `json:"objects"`
}

type ConversionResponse struct {
	UID              string            `json:"uid"`
	ConvertedObjects []json.RawMessage `json:"convertedObjects,omitempty"`
	Result           Status            `json:"result"`
}

type Status struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// ---- ObjectMeta ------------------------------------------------------------

type ManagedFieldsEntry struct {
	Manager     string          `json:"manager,omitempty"`
	Operation   string          `json:"operation,omitempty"`
	APIVersion  string          `json:"apiVersion,omitempty"`
	Time        string          `json:"time,omitempty"`
	FieldsType  string          `json:"fieldsType,omitempty"`
	FieldsV1    json.RawMessage `json:"fieldsV1,omitempty"`
	Subresource string          `json:"subresource,omitempty"`
}

type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ObjectMeta holds the ObjectMeta fields, typed as metav1.ObjectMeta.
type ObjectMeta struct {
	Name                       string               `json:"name,omitempty"`
	GenerateName               string               `json:"generateName,omitempty"`
	Namespace                  string               `json:"namespace,omitempty"`
	SelfLink                   string               `json:"selfLink,omitempty"`
	UID                        string               `json:"uid,omitempty"`
	ResourceVersion            string               `json:"resourceVersion,omitempty"`
	Generation                 int64                `json:"generation,omitempty"`
	CreationTimestamp          string               `json:"creationTimestamp,omitempty"`
	DeletionTimestamp          string               `json:"deletionTimestamp,omitempty"`
	DeletionGracePeriodSeconds *int64               `json:"deletionGracePeriodSeconds,omitempty"`
	Labels                     map[string]string    `json:"labels,omitempty"`
	Annotations                map[string]string    `json:"annotations,omitempty"`
	OwnerReferences            []OwnerReference     `json:"ownerReferences,omitempty"`
	Finalizers                 []string             `json:"finalizers,omitempty"`
	ManagedFields              []ManagedFieldsEntry `json:"managedFields,omitempty"`
}

// exact: encoding m gives back an object of n members, i.e. the input had
// no member unknown to ObjectMeta, no zero value and no empty map or list
// (which omitempty would drop). Otherwise metadata is carried over as raw
// members and only its annotations are replaced.
func (m *ObjectMeta) exact(n int) bool {
	if m.Labels != nil && len(m.Labels) == 0 || m.Annotations != nil && len(m.Annotations) == 0 ||
		m.OwnerReferences != nil && len(m.OwnerReferences) == 0 ||
		m.Finalizers != nil && len(m.Finalizers) == 0 ||
		m.ManagedFields != nil && len(m.ManagedFields) == 0 {
		return false
	}
	set := 0
	for _, b := range [...]bool{m.Name != "", m.GenerateName != "", m.Namespace != "",
		m.SelfLink != "", m.UID != "", m.ResourceVersion != "", m.Generation != 0,
		m.CreationTimestamp != "", m.DeletionTimestamp != "", m.DeletionGracePeriodSeconds != nil,
		m.Labels != nil, m.Annotations != nil, m.OwnerReferences != nil, m.Finalizers != nil,
		m.ManagedFields != nil} {
		if b {
			set++
		}
	}
	return set == n
}

// ---- a raw scan of valid JSON (no decoding) --------------------------------

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString: b[i] is the opening quote; returns the index after the closing one.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// members calls fn for each member of the JSON object b (raw key without
// quotes, raw value); stops when fn returns false.
func members(b []byte, fn func(key, val []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		ke := skipString(b, i)
		key := b[i+1 : ke-1]
		i = skipSpace(b, ke)
		i = skipSpace(b, i+1) // ':'
		ve := skipValue(b, i)
		if !fn(key, b[i:ve]) {
			return
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
}

func member(b []byte, key string) (val []byte) {
	members(b, func(k, v []byte) bool {
		if string(k) == key {
			val = v
			return false
		}
		return true
	})
	return val
}

func countMembers(b []byte) int {
	n := 0
	members(b, func(k, v []byte) bool { n++; return true })
	return n
}

// ---- MyResource v1 and v2 --------------------------------------------------

type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

type MyResourceV1 struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     *SpecV1    `json:"spec,omitempty"`
	Status   *StatusV1  `json:"status,omitempty"`
}

type SpecV1 struct {
	Replicas    *int32  `json:"replicas,omitempty"`
	Image       *string `json:"image,omitempty"`
	Port        *int32  `json:"port,omitempty"`
	ServiceType *string `json:"serviceType,omitempty"`
}

type StatusV1 struct {
	ObservedGeneration *int64       `json:"observedGeneration,omitempty"`
	Replicas           *int32       `json:"replicas,omitempty"`
	ReadyReplicas      *int32       `json:"readyReplicas,omitempty"`
	Conditions         *[]Condition `json:"conditions,omitempty"`
}

type MyResourceV2 struct {
	TypeMeta `json:",inline"`
	// *ObjectMeta, or map[string]json.RawMessage when ObjectMeta cannot
	// give the input back (see ObjectMeta.exact); nil when absent.
	Metadata interface{} `json:"metadata,omitempty"`
	Spec     *SpecV2     `json:"spec,omitempty"`
	Status   *StatusV2   `json:"status,omitempty"`
}

type ImageV2 struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest,omitempty"`
}

type PortV2 struct {
	Name     string `json:"name,omitempty"`
	Port     *int32 `json:"port,omitempty"`
	Protocol string `json:"protocol,omitempty"`
}

type ServiceV2 struct {
	Type string `json:"type,omitempty"`
}

type SpecV2 struct {
	Replicas *int32     `json:"replicas,omitempty"`
	Image    *ImageV2   `json:"image,omitempty"`
	Ports    []PortV2   `json:"ports,omitempty"`
	Service  *ServiceV2 `json:"service,omitempty"`
	Paused   *bool      `json:"paused,omitempty"`
}

type ReplicasV2 struct {
	Desired *int32 `json:"desired,omitempty"`
	Ready   *int32 `json:"ready,omitempty"`
}

type StatusV2 struct {
	ObservedGeneration *int64       `json:"observedGeneration,omitempty"`
	Replicas           *ReplicasV2  `json:"replicas,omitempty"`
	Conditions         *[]Condition `json:"conditions,omitempty"`
}

// Extras: the v2-extras annotation (what v1 cannot hold).
type Extras struct {
	Image   *ImageV2   `json:"image,omitempty"`
	Ports   []PortV2   `json:"ports,omitempty"`
	Service *ServiceV2 `json:"service,omitempty"`
	Paused  *bool      `json:"paused,omitempty"`
	Status  *struct {
		Replicas *ReplicasV2 `json:"replicas,omitempty"`
	} `json:"status,omitempty"`
	EmptyAnnotations bool `json:"emptyAnnotations,omitempty"`
}

// ---- image references (docs/api.md §2.3: digest after '@', tag after the last
// ':' that follows the last '/', else the whole string is the repository) --

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }
func isWord(c byte) bool  { return isAlnum(c) || c == '_' }
func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func tagOK(s string) bool {
	if len(s) < 1 || len(s) > 128 || !isWord(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isWord(s[i]) && s[i] != '.' && s[i] != '-' {
			return false
		}
	}
	return true
}

func digestOK(s string) bool {
	i := 0
	for {
		if i >= len(s) || !isAlpha(s[i]) {
			return false
		}
		i++
		for i < len(s) && isAlnum(s[i]) {
			i++
		}
		if i < len(s) && strings.IndexByte("-_+.", s[i]) >= 0 {
			i++
			continue
		}
		break
	}
	if i >= len(s) || s[i] != ':' {
		return false
	}
	hex := len(s) - i - 1
	for i++; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return hex >= 32
}

func splitImage(s string) *ImageV2 {
	img := &ImageV2{}
	rest := s
	if at := strings.IndexByte(s, '@'); at >= 0 {
		if !digestOK(s[at+1:]) {
			return &ImageV2{Repository: s}
		}
		img.Digest = s[at+1:]
		rest = s[:at]
	}
	from := strings.LastIndexByte(rest, '/') + 1
	if c := strings.LastIndexByte(rest[from:], ':'); c >= 0 {
		tag := rest[from+c+1:]
		if !tagOK(tag) {
			return &ImageV2{Repository: s}
		}
		img.Tag = tag
		rest = rest[:from+c]
	}
	if rest == "" {
		return &ImageV2{Repository: s}
	}
	img.Repository = rest
	return img
}

func joinImage(i *ImageV2) string {
	s := i.Repository
	if i.Tag != "" {
		s += ":" + i.Tag
	}
	if i.Digest != "" {
		s += "@" + i.Digest
	}
	return s
}

// ---- v1 -> v2 ------------------------------------------------------------

// toV2 converts in; rawMeta is the metadata member of the input, as it came.
func toV2(in *MyResourceV1, rawMeta []byte) (*MyResourceV2, error) {
	out := &MyResourceV2{TypeMeta: TypeMeta{APIVersion: groupV2, Kind: in.Kind}}
	exact := rawMeta == nil || in.Metadata.exact(countMembers(rawMeta))
	var ex *Extras
	if a, ok := in.Metadata.Annotations[extrasAnnotation]; ok {
		e := &Extras{}
		if json.Unmarshal([]byte(a), e) == nil {
			ex = e
		}
	}
	if in.Spec != nil {
		s := &SpecV2{Replicas: in.Spec.Replicas}
		if ex != nil && ex.Image != nil && in.Spec.Image != nil && joinImage(ex.Image) == *in.Spec.Image {
			s.Image = ex.Image
		} else if in.Spec.Image != nil {
			s.Image = splitImage(*in.Spec.Image)
		}
		switch {
		case ex != nil && len(ex.Ports) > 0:
			s.Ports = ex.Ports
			s.Ports[0].Port = in.Spec.Port
		case in.Spec.Port != nil:
			s.Ports = []PortV2{{Name: "http", Port: in.Spec.Port, Protocol: "TCP"}}
		}
		switch {
		case ex != nil && ex.Service != nil:
			s.Service = ex.Service
			s.Service.Type = ""
			if in.Spec.ServiceType != nil {
				s.Service.Type = *in.Spec.ServiceType
			}
		case in.Spec.ServiceType != nil:
			s.Service = &ServiceV2{Type: *in.Spec.ServiceType}
		}
		if ex != nil {
			s.Paused = ex.Paused
		}
		out.Spec = s
	}
	if in.Status != nil {
		st := &StatusV2{ObservedGeneration: in.Status.ObservedGeneration, Conditions: in.Status.Conditions}
		switch {
		case ex != nil && ex.Status != nil && ex.Status.Replicas != nil:
			st.Replicas = ex.Status.Replicas
			st.Replicas.Desired = in.Status.Replicas
			st.Replicas.Ready = in.Status.ReadyReplicas
		case in.Status.Replicas != nil || in.Status.ReadyReplicas != nil:
			st.Replicas = &ReplicasV2{Desired: in.Status.Replicas, Ready: in.Status.ReadyReplicas}
		}
		out.Status = st
	}
	annChanged := false
	if ex != nil {
		ann := make(map[string]string, len(in.Metadata.Annotations))
		for k, v := range in.Metadata.Annotations {
			if k != extrasAnnotation {
				ann[k] = v
			}
		}
		annChanged = true
		if len(ann) == 0 && !ex.EmptyAnnotations {
			ann = nil
		} else if len(ann) == 0 {
			exact = false // "annotations": {} stays
		}
		in.Metadata.Annotations = ann
	}
	switch {
	case rawMeta == nil:
	case exact:
		out.Metadata = &in.Metadata
	default:
		var mm map[string]json.RawMessage
		if err := json.Unmarshal(rawMeta, &mm); err != nil {
			return nil, err
		}
		if annChanged && in.Metadata.Annotations == nil {
			delete(mm, "annotations")
		} else if annChanged {
			b, err := json.Marshal(in.Metadata.Annotations)
			if err != nil {
				return nil, err
			}
			mm["annotations"] = b
		}
		out.Metadata = mm
	}
	return out, nil
}

// convertObject converts one raw object to desired.
func convertObject(raw json.RawMessage, desired string) (json.RawMessage, error) {
	var tm TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, err
	}
	if tm.Kind != kindMyResource || (tm.APIVersion != groupV1 && tm.APIVersion != groupV2) {
		return nil, fmt.Errorf("unsupported object %s, Kind=%s", tm.APIVersion, tm.Kind)
	}
	if tm.APIVersion == desired {
		return raw, nil
	}
	if desired != groupV2 {
		return nil, errors.New("this peer converts " + groupV1 + " -> " + groupV2 + " only")
	}
	var v1 MyResourceV1
	if err := json.Unmarshal(raw, &v1); err != nil {
		return nil, err
	}
	v2, err := toV2(&v1, member(raw, "metadata"))
	if err != nil {
		return nil, err
	}
	return json.Marshal(v2)
}

func convertReview(rv *ConversionReview) {
	req := rv.Request
	resp := &ConversionResponse{UID: req.UID, Result: Status{Status: "Success"}}
	rv.Request = nil
	rv.Response = resp
	if req.DesiredAPIVersion != groupV1 && req.DesiredAPIVersion != groupV2 {
		resp.Result = Status{Status: "Failure", Message: "unsupported desiredAPIVersion " + req.DesiredAPIVersion}
		return
	}
	converted := make([]json.RawMessage, len(req.Objects))
	for i, o := range req.Objects {
		c, err := convertObject(o, req.DesiredAPIVersion)
		if err != nil {
			resp.Result = Status{Status: "Failure", Message: fmt.Sprintf("object %d: %v", i, err)}
			return
		}
		converted[i] = c
	}
	resp.ConvertedObjects = converted
}

// ---- HTTP ----------------------------------------------------------------

func handleConvert(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var rv ConversionReview
	if err := json.Unmarshal(body, &rv); err != nil {
		http.Error(w, "cannot decode ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if rv.Kind != "ConversionReview" || (rv.APIVersion != "apiextensions.k8s.io/v1" &&
		rv.APIVersion != "apiextensions.k8s.io/v1beta1") || rv.Request == nil {
		http.Error(w, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	convertReview(&rv)
	out, err := json.Marshal(&rv)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(out)))
	w.Write(out)
}

func main() {
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key")
	host := flag.String("host", "127.0.0.1", "address to bind")
	port := flag.Int("port", 0, "port (0: the kernel picks one)")
	flag.Parse()
	if *certDir == "" {
		log.Fatal("-cert-dir is required")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", handleConvert)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	err = srv.ServeTLS(ln, filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	log.Fatal(err)
}
