// bundle-validate checks an OLM bundle directory the way `operator-sdk bundle validate` does, with
// the validation library operator-sdk itself uses (github.com/operator-framework/api):
//
//   - the bundle is loaded by manifests.GetBundleFromDir (CSV, CRDs and other objects of manifests/,
//     package and channels from metadata/annotations.yaml);
//   - validation.DefaultBundleValidators (the CSV, the CRDs, the bundle: every owned CRD is in the
//     bundle and every CRD in the bundle is owned, install modes, RBAC, alm-examples parse and
//     match an owned CRD, ...);
//   - the optional suites operator-sdk selects with --select-optional: OperatorHub (v2),
//     standard capabilities and categories, good practices, and deprecated APIs for -k8s-version;
//   - metadata/annotations.yaml has the registry+v1 keys (operator-sdk checks them with
//     operator-registry), and bundle.Dockerfile's labels, when one is given, say the same.
//
// Every error and warning is printed, one per line. The exit status is 1 when there is an error,
// or a warning with -strict; 2 on bad usage.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	"sigs.k8s.io/yaml"
)

const annotationPrefix = "operators.operatorframework.io.bundle."

func main() {
	strict := flag.Bool("strict", false, "fail on warnings too")
	k8sVersion := flag.String("k8s-version", "", "check for APIs removed in this Kubernetes version (e.g. 1.36)")
	dockerfile := flag.String("dockerfile", "", "bundle.Dockerfile whose LABELs must equal metadata/annotations.yaml")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [-strict] [-k8s-version X.Y] [-dockerfile FILE] BUNDLE_DIR\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	dir := flag.Arg(0)

	var errs, warns []string
	annotations, problems := checkAnnotations(dir)
	errs = append(errs, problems...)
	if *dockerfile != "" && annotations != nil {
		errs = append(errs, checkDockerfile(*dockerfile, annotations)...)
	}

	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		errs = append(errs, fmt.Sprintf("loading the bundle: %v", err))
	} else {
		objs := bundle.ObjectsToValidate()
		optional := map[string]string{}
		if *k8sVersion != "" {
			optional["k8s-version"] = *k8sVersion
		}
		// The optional validators read their options from a map among the objects (as operator-sdk passes them).
		withOptions := append(objs, optional)
		validators := validation.DefaultBundleValidators.WithValidators(
			validation.OperatorHubV2Validator,
			validation.StandardCapabilitiesValidator,
			validation.StandardCategoriesValidator,
			validation.GoodPracticesValidator,
			validation.AlphaDeprecatedAPIsValidator,
			validation.ObjectValidator,
		)
		for _, result := range validators.Validate(withOptions...) {
			errs = append(errs, describe(result.Errors)...)
			warns = append(warns, describe(result.Warnings)...)
		}
	}

	errs, warns = unique(errs), unique(warns)
	for _, e := range errs {
		fmt.Println("ERROR " + e)
	}
	for _, w := range warns {
		fmt.Println("WARN  " + w)
	}
	if len(errs) > 0 || (*strict && len(warns) > 0) {
		fmt.Printf("bundle %s: %d error(s), %d warning(s): invalid\n", dir, len(errs), len(warns))
		os.Exit(1)
	}
	fmt.Printf("bundle %s: %d error(s), %d warning(s): valid\n", dir, len(errs), len(warns))
}

// unique drops repeated messages (a validator may report the bundle and its CSV alike), keeping order.
func unique(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func describe(list []errors.Error) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, e.Error())
	}
	return out
}

// checkAnnotations reads metadata/annotations.yaml and checks the keys every registry+v1 bundle has.
func checkAnnotations(dir string) (map[string]string, []string) {
	path := filepath.Join(dir, "metadata", "annotations.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{fmt.Sprintf("metadata/annotations.yaml: %v", err)}
	}
	var file struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, []string{fmt.Sprintf("metadata/annotations.yaml: %v", err)}
	}
	a := file.Annotations
	var errs []string
	want := map[string]string{
		annotationPrefix + "mediatype.v1": "registry+v1",
		annotationPrefix + "manifests.v1": "manifests/",
		annotationPrefix + "metadata.v1":  "metadata/",
	}
	for key, value := range want {
		if a[key] != value {
			errs = append(errs, fmt.Sprintf("metadata/annotations.yaml: %s is %q, want %q", key, a[key], value))
		}
	}
	if a[annotationPrefix+"package.v1"] == "" {
		errs = append(errs, "metadata/annotations.yaml: "+annotationPrefix+"package.v1 is missing")
	}
	channels := strings.Split(a[annotationPrefix+"channels.v1"], ",")
	if a[annotationPrefix+"channels.v1"] == "" {
		errs = append(errs, "metadata/annotations.yaml: "+annotationPrefix+"channels.v1 is missing")
	}
	if def := a[annotationPrefix+"channel.default.v1"]; def != "" {
		found := false
		for _, c := range channels {
			found = found || c == def
		}
		if !found {
			errs = append(errs, fmt.Sprintf("metadata/annotations.yaml: the default channel %q is not one of the channels %q", def, channels))
		}
	}
	for _, sub := range []string{"manifests", "metadata"} {
		if info, err := os.Stat(filepath.Join(dir, sub)); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Sprintf("%s/ is missing from the bundle", sub))
		}
	}
	return a, errs
}

// checkDockerfile: the image's LABELs must carry exactly the annotations (OLM reads the labels of
// the bundle image, opm and operator-sdk the file).
func checkDockerfile(path string, annotations map[string]string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	defer f.Close()
	labels := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 2 && strings.EqualFold(fields[0], "LABEL") {
			key, value, ok := strings.Cut(fields[1], "=")
			if ok {
				labels[key] = value
			}
		}
	}
	var errs []string
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if labels[k] != annotations[k] {
			errs = append(errs, fmt.Sprintf("%s: LABEL %s is %q, metadata/annotations.yaml says %q", filepath.Base(path), k, labels[k], annotations[k]))
		}
	}
	for k := range labels {
		if _, ok := annotations[k]; !ok && strings.HasPrefix(k, annotationPrefix) {
			errs = append(errs, fmt.Sprintf("%s: LABEL %s is not in metadata/annotations.yaml", filepath.Base(path), k))
		}
	}
	return errs
}
