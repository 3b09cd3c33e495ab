// Command manifestcheck validates rendered Kubernetes manifests (`helm template` output) as an
// API server would before storing them, without a cluster:
//
//   - built-in kinds are decoded strictly into the k8s.io/api types (an unknown or duplicate
//     field, or a value of the wrong type, is an error), then checked for what the API server
//     refuses that decoding cannot see: object names, labels, selectors matching the pod
//     template, container, port and environment names, mounts and probes naming what exists;
//   - custom resources are validated against the OpenAPI schema of their
//     CustomResourceDefinition's version with the API server's own code
//     (k8s.io/apiextensions-apiserver): types, enums, patterns, required fields, fields the
//     schema does not know (which the server would prune), and x-kubernetes-validations rules.
//
// A document of a kind with neither a built-in type nor a loaded definition is an error. A
// namespaced object without a namespace gets -namespace, as the server takes it from the request.
//
// Usage: manifestcheck -crds DIR [-namespace NAME] [FILE ...]   (standard input without FILE)
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

var namespace string

// customSchema is one served version of a CustomResourceDefinition, ready to validate.
type customSchema struct {
	namespaced bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	rules      *cel.Validator
}

func main() {
	crdDir := flag.String("crds", "", "folder of CustomResourceDefinition YAML files")
	flag.StringVar(&namespace, "namespace", "default", "namespace of objects that name none")
	flag.Parse()
	customs, err := loadDefinitions(*crdDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifestcheck:", err)
		os.Exit(2)
	}
	inputs := flag.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	strict := kjson.NewSerializerWithOptions(
		kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true},
	)
	var problems []string
	count := 0
	for _, input := range inputs {
		docs, err := readDocuments(input)
		if err != nil {
			fmt.Fprintln(os.Stderr, "manifestcheck:", err)
			os.Exit(2)
		}
		for _, doc := range docs {
			count++
			for _, problem := range check(doc, scheme, strict, customs) {
				problems = append(problems, problem)
			}
		}
	}
	for _, problem := range problems {
		fmt.Println(problem)
	}
	if len(problems) > 0 {
		fmt.Printf("manifestcheck: %d problem(s) in %d document(s)\n", len(problems), count)
		os.Exit(1)
	}
	fmt.Printf("manifestcheck: %d document(s) valid\n", count)
}

func readDocuments(input string) ([][]byte, error) {
	var reader io.Reader = os.Stdin
	if input != "-" {
		file, err := os.Open(input)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		reader = file
	}
	documents := yamlutil.NewYAMLReader(bufio.NewReader(reader))
	var out [][]byte
	for {
		doc, err := documents.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			out = append(out, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var kept [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			kept = append(kept, line)
		}
	}
	return bytes.Join(kept, []byte("\n"))
}

func check(
	doc []byte, scheme *runtime.Scheme, strict *kjson.Serializer,
	customs map[schema.GroupVersionKind]customSchema,
) []string {
	// As the API server reads a request: whole numbers are int64, not float64 (CEL rules and
	// integer formats depend on it).
	var object map[string]interface{}
	asJSON, err := yaml.YAMLToJSON(doc)
	if err == nil {
		err = utiljson.Unmarshal(asJSON, &object)
	}
	if err != nil {
		return []string{fmt.Sprintf("unparsable document: %v", err)}
	}
	gvk := schema.FromAPIVersionAndKind(str(object["apiVersion"]), str(object["kind"]))
	metadata, _ := object["metadata"].(map[string]interface{})
	where := fmt.Sprintf("%s %s", gvk.Kind, str(metadata["name"]))
	var errs field.ErrorList
	if scheme.Recognizes(gvk) {
		decoded, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", where, err)}
		}
		if accessor, ok := decoded.(metav1.Object); ok && accessor.GetNamespace() == "" {
			accessor.SetNamespace(namespace)
		}
		errs = validateBuiltin(decoded)
	} else if custom, found := customs[gvk]; found {
		errs = validateCustom(object, custom)
	} else {
		return []string{fmt.Sprintf("%s: no schema for %s", where, gvk)}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s: %v", where, e))
	}
	return out
}

func str(value interface{}) string {
	s, _ := value.(string)
	return s
}

func validateCustom(object map[string]interface{}, custom customSchema) field.ErrorList {
	var errs field.ErrorList
	var meta metav1.ObjectMeta
	if raw, err := yaml.Marshal(object["metadata"]); err == nil {
		if err := yaml.UnmarshalStrict(raw, &meta); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata"), "", err.Error()))
		}
	}
	if custom.namespaced && meta.Namespace == "" {
		meta.Namespace = namespace
	}
	errs = append(errs, metavalidation.ValidateObjectMeta(
		&meta, custom.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"),
	)...)
	body := runtime.DeepCopyJSON(object)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, body, custom.validator)...)
	unknown := pruning.PruneWithOptions(
		runtime.DeepCopyJSON(object), custom.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true},
	)
	for _, path := range unknown {
		errs = append(errs, field.NotSupported(field.NewPath(path), "", []string{"(no such field)"}))
	}
	if custom.rules != nil {
		ruleErrs, _ := custom.rules.Validate(
			context.Background(), nil, custom.structural, body, nil, celconfig.RuntimeCELCostBudget,
		)
		errs = append(errs, ruleErrs...)
	}
	return errs
}

// loadDefinitions reads every CustomResourceDefinition in dir, by group, version and kind.
func loadDefinitions(dir string) (map[schema.GroupVersionKind]customSchema, error) {
	out := map[schema.GroupVersionKind]customSchema{}
	if dir == "" {
		return out, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, path := range files {
		docs, err := readDocuments(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, doc := range docs {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(doc, &crd); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			for _, version := range crd.Spec.Versions {
				if !version.Served || version.Schema == nil {
					continue
				}
				custom, err := compile(version.Schema.OpenAPIV3Schema)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", crd.Name, version.Name, err)
				}
				custom.namespaced = crd.Spec.Scope == apiextensionsv1.NamespaceScoped
				gvk := schema.GroupVersionKind{
					Group: crd.Spec.Group, Version: version.Name, Kind: crd.Spec.Names.Kind,
				}
				out[gvk] = custom
			}
		}
	}
	return out, nil
}

func compile(props *apiextensionsv1.JSONSchemaProps) (customSchema, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
		props, internal, nil,
	); err != nil {
		return customSchema{}, err
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return customSchema{}, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return customSchema{}, err
	}
	return customSchema{
		structural: structural,
		validator:  validator,
		rules:      cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// validateBuiltin checks what strict decoding cannot: names and the references inside a pod.
func validateBuiltin(object runtime.Object) field.ErrorList {
	meta := field.NewPath("metadata")
	switch o := object.(type) {
	case *corev1.Service:
		errs := metavalidation.ValidateObjectMeta(
			&o.ObjectMeta, true, metavalidation.NameIsDNS1035Label, meta,
		)
		for i, port := range o.Spec.Ports {
			errs = append(errs, portName(port.Name, field.NewPath("spec", "ports").Index(i))...)
		}
		return errs
	case *corev1.ConfigMap:
		errs := metavalidation.ValidateObjectMeta(
			&o.ObjectMeta, true, metavalidation.NameIsDNSSubdomain, meta,
		)
		for key := range o.Data {
			for _, msg := range validation.IsConfigMapKey(key) {
				errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
			}
		}
		return errs
	case *appsv1.Deployment:
		errs := metavalidation.ValidateObjectMeta(
			&o.ObjectMeta, true, metavalidation.NameIsDNSSubdomain, meta,
		)
		spec := field.NewPath("spec")
		errs = append(errs, selects(o.Spec.Selector, o.Spec.Template.Labels, spec)...)
		return append(errs, podSpec(&o.Spec.Template.Spec, spec.Child("template", "spec"))...)
	case *batchv1.CronJob:
		errs := metavalidation.ValidateObjectMeta(
			&o.ObjectMeta, true, metavalidation.NameIsDNSSubdomain, meta,
		)
		if len(o.Name) > 52 {
			errs = append(errs, field.TooLong(meta.Child("name"), o.Name, 52))
		}
		if strings.TrimSpace(o.Spec.Schedule) == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "schedule"), ""))
		}
		pod := field.NewPath("spec", "jobTemplate", "spec", "template", "spec")
		template := o.Spec.JobTemplate.Spec.Template.Spec
		if template.RestartPolicy != corev1.RestartPolicyOnFailure &&
			template.RestartPolicy != corev1.RestartPolicyNever {
			errs = append(errs, field.NotSupported(pod.Child("restartPolicy"),
				template.RestartPolicy, []string{"OnFailure", "Never"}))
		}
		return append(errs, podSpec(&template, pod)...)
	default:
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("no checks for %T", object))}
	}
}

func selects(selector *metav1.LabelSelector, labels map[string]string, spec *field.Path) field.ErrorList {
	if selector == nil {
		return field.ErrorList{field.Required(spec.Child("selector"), "")}
	}
	errs := metav1validation.ValidateLabelSelector(
		selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"),
	)
	compiled, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return append(errs, field.Invalid(spec.Child("selector"), selector, err.Error()))
	}
	errs = append(errs, metav1validation.ValidateLabels(labels, spec.Child("template", "metadata", "labels"))...)
	if !compiled.Matches(labelSet(labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), labels,
			"`selector` does not match template `labels`"))
	}
	return errs
}

type labelSet map[string]string

func (l labelSet) Has(key string) bool   { _, ok := l[key]; return ok }
func (l labelSet) Get(key string) string { return l[key] }
func (l labelSet) Lookup(key string) (string, bool) {
	value, ok := l[key]
	return value, ok
}

func podSpec(pod *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, volume := range pod.Volumes {
		at := path.Child("volumes").Index(i)
		errs = append(errs, dnsLabel(volume.Name, at.Child("name"))...)
		if volumes[volume.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), volume.Name))
		}
		volumes[volume.Name] = true
	}
	if len(pod.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	for i := range pod.Containers {
		errs = append(errs, container(&pod.Containers[i], volumes, path.Child("containers").Index(i))...)
	}
	return errs
}

func container(c *corev1.Container, volumes map[string]bool, path *field.Path) field.ErrorList {
	errs := dnsLabel(c.Name, path.Child("name"))
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	}
	ports := map[string]bool{}
	for i, port := range c.Ports {
		at := path.Child("ports").Index(i)
		if port.Name != "" {
			errs = append(errs, portName(port.Name, at.Child("name"))...)
			ports[port.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(at.Child("containerPort"), port.ContainerPort, msg))
		}
	}
	for i, env := range c.Env {
		at := path.Child("env").Index(i)
		if !envName.MatchString(env.Name) {
			errs = append(errs, field.Invalid(at.Child("name"), env.Name, "not an environment variable name"))
		}
		if env.Value != "" && env.ValueFrom != nil {
			errs = append(errs, field.Invalid(at, env.Name, "both value and valueFrom"))
		}
		if ref := env.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			if ref.SecretKeyRef.Name == "" || ref.SecretKeyRef.Key == "" {
				errs = append(errs, field.Required(at.Child("valueFrom", "secretKeyRef"), "name and key"))
			}
		}
	}
	for i, mount := range c.VolumeMounts {
		at := path.Child("volumeMounts").Index(i)
		if !volumes[mount.Name] {
			errs = append(errs, field.NotFound(at.Child("name"), mount.Name))
		}
		if !strings.HasPrefix(mount.MountPath, "/") {
			errs = append(errs, field.Invalid(at.Child("mountPath"), mount.MountPath, "must be absolute"))
		}
	}
	for name, probe := range map[string]*corev1.Probe{
		"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe,
	} {
		if probe == nil {
			continue
		}
		if get := probe.HTTPGet; get != nil && get.Port.StrVal != "" && !ports[get.Port.StrVal] {
			errs = append(errs, field.NotFound(path.Child(name, "httpGet", "port"), get.Port.StrVal))
		}
	}
	return errs
}

func dnsLabel(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func portName(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortName(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}
