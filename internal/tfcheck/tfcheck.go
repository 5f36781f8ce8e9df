// Package tfcheck reads ferry's Terraform configuration (terraform/) far
// enough to check it against the Go code, on a machine where the google
// provider cannot be downloaded and `terraform validate` cannot run.
//
// Load parses every .tf file with hcl/v2. Evaluate gives the variables
// values (a scenario, as a terraform.tfvars would) and evaluates locals,
// outputs and the top-level attributes of every resource instance
// (for_each, count) the way Terraform would, with Terraform's common
// functions. What only the provider knows after apply (an id, an email) is
// a symbolic string "ref:<address>.<attribute>", so a check can still ask
// which resource an attribute points to. The checks themselves are the
// package's tests.
package tfcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Module is a parsed Terraform root module.
type Module struct {
	Dir       string
	Variables map[string]*hclsyntax.Block
	Locals    map[string]*hclsyntax.Attribute
	Outputs   map[string]*hclsyntax.Block
	Resources []*Resource
	// Blocks holds every other top-level block (terraform, provider).
	Blocks []*hclsyntax.Block
}

// Resource is a resource or data block.
type Resource struct {
	Mode       string // "resource" or "data"
	Type, Name string
	Body       *hclsyntax.Body
}

// Addr is the resource's Terraform address (data.T.N or T.N).
func (r *Resource) Addr() string {
	if r.Mode == "data" {
		return "data." + r.Type + "." + r.Name
	}
	return r.Type + "." + r.Name
}

// Load parses the .tf files of dir. Errors name file and line.
func Load(dir string) (*Module, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .tf files", dir)
	}
	sort.Strings(files)
	m := &Module{Dir: dir, Variables: map[string]*hclsyntax.Block{}, Locals: map[string]*hclsyntax.Attribute{}, Outputs: map[string]*hclsyntax.Block{}}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diags
		}
		body := f.Body.(*hclsyntax.Body)
		if len(body.Attributes) > 0 {
			for _, a := range body.Attributes {
				return nil, fmt.Errorf("%s: top-level attribute %s", a.SrcRange, a.Name)
			}
		}
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable":
				m.Variables[b.Labels[0]] = b
			case "locals":
				for name, a := range b.Body.Attributes {
					if _, dup := m.Locals[name]; dup {
						return nil, fmt.Errorf("%s: local.%s defined twice", a.SrcRange, name)
					}
					m.Locals[name] = a
				}
			case "output":
				m.Outputs[b.Labels[0]] = b
			case "resource", "data":
				m.Resources = append(m.Resources, &Resource{Mode: b.Type, Type: b.Labels[0], Name: b.Labels[1], Body: b.Body})
			default:
				m.Blocks = append(m.Blocks, b)
			}
		}
	}
	return m, nil
}

// Resource returns the resource at addr (T.N or data.T.N), or nil.
func (m *Module) Resource(addr string) *Resource {
	for _, r := range m.Resources {
		if r.Addr() == addr {
			return r
		}
	}
	return nil
}

// ResourcesOf returns the managed resources of type typ.
func (m *Module) ResourcesOf(typ string) []*Resource {
	var out []*Resource
	for _, r := range m.Resources {
		if r.Mode == "resource" && r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// Instance is one instance of a resource: the resource itself, or one key
// of its for_each or index of its count.
type Instance struct {
	Res *Resource
	// Key is the for_each key (a string) or count index (a number);
	// cty.NilVal for a resource with neither.
	Key  cty.Value
	each cty.Value
	ev   *Eval
}

// Addr is the instance's address, e.g. google_pubsub_topic.topic["chunks"].
func (in *Instance) Addr() string { return in.Res.Addr() + keySuffix(in.Key) }

func keySuffix(k cty.Value) string {
	switch {
	case k == cty.NilVal:
		return ""
	case k.Type() == cty.String:
		return fmt.Sprintf("[%q]", k.AsString())
	default:
		return "[" + k.AsBigFloat().String() + "]"
	}
}

// Attr evaluates attribute name of body (the resource's own body, or a
// nested block's from Blocks) for this instance.
func (in *Instance) Attr(body *hclsyntax.Body, name string) (cty.Value, bool, error) {
	a, ok := body.Attributes[name]
	if !ok {
		return cty.NilVal, false, nil
	}
	v, diags := a.Expr.Value(in.ev.ctx(in))
	if diags.HasErrors() {
		return cty.DynamicVal, true, diags
	}
	return v, true, nil
}

// Blocks returns the nested blocks of type typ in body (not dynamic ones).
func Blocks(body *hclsyntax.Body, typ string) []*hclsyntax.Body {
	var out []*hclsyntax.Body
	for _, b := range body.Blocks {
		if b.Type == typ {
			out = append(out, b.Body)
		}
	}
	return out
}

// Eval is the module evaluated under one set of variable values.
type Eval struct {
	m         *Module
	vars      cty.Value
	locals    map[string]cty.Value
	resources map[string]cty.Value // root name (type, or "data") → object
	instances map[*Resource][]*Instance
	// Errors are what could not be evaluated in the last pass: a
	// reference to something that does not exist, an unknown function,
	// a type error. A clean configuration has none.
	Errors []string
	funcs  map[string]function.Function
}

// passes bounds the fixpoint: each pass resolves one more level of
// references between locals and resources.
const passes = 16

// Evaluate evaluates m with vars (variable name → value); variables not in
// vars take their defaults. A variable with neither is an error.
func (m *Module) Evaluate(vars map[string]cty.Value) (*Eval, error) {
	ev := &Eval{m: m, locals: map[string]cty.Value{}, resources: map[string]cty.Value{}, instances: map[*Resource][]*Instance{}}
	ev.funcs = functions()
	vv := map[string]cty.Value{}
	for name, b := range m.Variables {
		if v, ok := vars[name]; ok {
			vv[name] = v
			continue
		}
		a, ok := b.Body.Attributes["default"]
		if !ok {
			return nil, fmt.Errorf("variable %q has no default and the scenario gives no value", name)
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, fmt.Errorf("variable %q: %s", name, diags.Error())
		}
		vv[name] = v
	}
	for name := range vars {
		if _, ok := m.Variables[name]; !ok {
			return nil, fmt.Errorf("the scenario sets %q, which is no variable", name)
		}
	}
	ev.vars = cty.ObjectVal(vv)
	for name := range m.Locals {
		ev.locals[name] = cty.DynamicVal
	}
	ev.resources = ev.resourceValues()
	for i := 0; i < passes; i++ {
		ev.Errors = nil
		changed := false
		locals := map[string]cty.Value{}
		for name, a := range m.Locals {
			v, diags := a.Expr.Value(ev.ctx(nil))
			if diags.HasErrors() {
				ev.Errors = append(ev.Errors, fmt.Sprintf("local.%s: %s", name, diags.Error()))
				v = cty.DynamicVal
			}
			if !v.RawEquals(ev.locals[name]) {
				changed = true
			}
			locals[name] = v
		}
		ev.locals = locals
		ev.instances = map[*Resource][]*Instance{}
		for _, r := range m.Resources {
			ev.instances[r] = ev.expand(r)
		}
		res := ev.resourceValues()
		for k, v := range res {
			if !v.RawEquals(ev.resources[k]) {
				changed = true
			}
		}
		ev.resources = res
		if !changed && i > 0 {
			break
		}
	}
	for _, r := range m.Resources {
		for _, in := range ev.instances[r] {
			for name, a := range r.Body.Attributes {
				if _, diags := a.Expr.Value(ev.ctx(in)); diags.HasErrors() {
					ev.Errors = append(ev.Errors, fmt.Sprintf("%s.%s: %s", in.Addr(), name, diags.Error()))
				}
			}
		}
	}
	for name, b := range m.Outputs {
		if _, diags := b.Body.Attributes["value"].Expr.Value(ev.ctx(nil)); diags.HasErrors() {
			ev.Errors = append(ev.Errors, fmt.Sprintf("output.%s: %s", name, diags.Error()))
		}
	}
	sort.Strings(ev.Errors)
	return ev, nil
}

// Var returns the value of variable name.
func (ev *Eval) Var(name string) cty.Value { return ev.vars.GetAttr(name) }

// Local returns the value of local.name (cty.NilVal if there is none).
func (ev *Eval) Local(name string) cty.Value {
	v, ok := ev.locals[name]
	if !ok {
		return cty.NilVal
	}
	return v
}

// Output evaluates output name.
func (ev *Eval) Output(name string) (cty.Value, error) {
	b, ok := ev.m.Outputs[name]
	if !ok {
		return cty.NilVal, fmt.Errorf("no output %q", name)
	}
	v, diags := b.Body.Attributes["value"].Expr.Value(ev.ctx(nil))
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return v, nil
}

// Instances returns the instances of r (none when count is 0 or for_each
// empty, or when they could not be evaluated).
func (ev *Eval) Instances(r *Resource) []*Instance { return ev.instances[r] }

// Resolve maps a symbolic reference "ref:ADDR.ATTR" back to the instance
// it names and the attribute; ok is false for any other value.
func (ev *Eval) Resolve(v cty.Value) (in *Instance, attr string, ok bool) {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return nil, "", false
	}
	s, found := strings.CutPrefix(v.AsString(), "ref:")
	if !found {
		return nil, "", false
	}
	dot := strings.LastIndex(s, ".")
	addr, attr := s[:dot], s[dot+1:]
	for _, r := range ev.m.Resources {
		for _, in := range ev.instances[r] {
			if in.Addr() == addr {
				return in, attr, true
			}
		}
	}
	return nil, "", false
}

func (ev *Eval) expand(r *Resource) []*Instance {
	if a, ok := r.Body.Attributes["for_each"]; ok {
		v, diags := a.Expr.Value(ev.ctx(nil))
		// A map's keys are known when the map is; its values may not be.
		if diags.HasErrors() || !v.IsKnown() || v.IsNull() {
			return nil
		}
		var out []*Instance
		if v.Type().IsSetType() {
			if !v.IsWhollyKnown() {
				return nil
			}
			for it := v.ElementIterator(); it.Next(); {
				_, e := it.Element()
				if e.Type() != cty.String {
					return nil
				}
				out = append(out, &Instance{Res: r, Key: e, each: e, ev: ev})
			}
			return out
		}
		if !v.CanIterateElements() {
			return nil
		}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out = append(out, &Instance{Res: r, Key: k, each: e, ev: ev})
		}
		return out
	}
	if a, ok := r.Body.Attributes["count"]; ok {
		v, diags := a.Expr.Value(ev.ctx(nil))
		if diags.HasErrors() || !v.IsKnown() || v.IsNull() {
			return nil
		}
		v, err := convert.Convert(v, cty.Number)
		if err != nil {
			return nil
		}
		n, _ := v.AsBigFloat().Int64()
		var out []*Instance
		for i := int64(0); i < n; i++ {
			out = append(out, &Instance{Res: r, Key: cty.NumberIntVal(i), ev: ev})
		}
		return out
	}
	return []*Instance{{Res: r, Key: cty.NilVal, ev: ev}}
}

// computed are attributes the provider sets; a reference to one is
// symbolic. Those a configuration indexes into are unknown instead.
var computed = []string{"id", "name", "email", "member", "self_link", "number", "email_address", "dataset_id", "table_id", "instance_group", "project", "unique_id"}
var computedUnknown = []string{"networks"}

func (ev *Eval) instanceValue(in *Instance) cty.Value {
	attrs := map[string]cty.Value{}
	for _, c := range computed {
		attrs[c] = cty.StringVal("ref:" + in.Addr() + "." + c)
	}
	for _, c := range computedUnknown {
		attrs[c] = cty.DynamicVal
	}
	for name, a := range in.Res.Body.Attributes {
		if name == "for_each" || name == "count" || name == "depends_on" {
			continue
		}
		v, diags := a.Expr.Value(ev.ctx(in))
		if diags.HasErrors() {
			v = cty.DynamicVal
		}
		attrs[name] = v
	}
	return cty.ObjectVal(attrs)
}

func (ev *Eval) resourceValues() map[string]cty.Value {
	byType := map[string]map[string]cty.Value{}
	data := map[string]map[string]cty.Value{}
	for _, r := range ev.m.Resources {
		var v cty.Value
		ins := ev.instances[r]
		_, forEach := r.Body.Attributes["for_each"]
		_, count := r.Body.Attributes["count"]
		switch {
		case forEach:
			if ins == nil && ev.expandFailed(r) {
				v = cty.DynamicVal
				break
			}
			m := map[string]cty.Value{}
			for _, in := range ins {
				if in.Key.Type() != cty.String {
					continue
				}
				m[in.Key.AsString()] = ev.instanceValue(in)
			}
			v = cty.ObjectVal(m)
		case count:
			var l []cty.Value
			for _, in := range ins {
				l = append(l, ev.instanceValue(in))
			}
			if len(l) == 0 {
				v = cty.EmptyTupleVal
			} else {
				v = cty.TupleVal(l)
			}
		default:
			if len(ins) == 1 {
				v = ev.instanceValue(ins[0])
			} else {
				v = cty.DynamicVal
			}
		}
		target := byType
		if r.Mode == "data" {
			target = data
		}
		if target[r.Type] == nil {
			target[r.Type] = map[string]cty.Value{}
		}
		target[r.Type][r.Name] = v
	}
	out := map[string]cty.Value{}
	for t, m := range byType {
		out[t] = cty.ObjectVal(m)
	}
	dv := map[string]cty.Value{}
	for t, m := range data {
		dv[t] = cty.ObjectVal(m)
	}
	out["data"] = cty.ObjectVal(dv)
	return out
}

func (ev *Eval) expandFailed(r *Resource) bool {
	v, diags := r.Body.Attributes["for_each"].Expr.Value(ev.ctx(nil))
	return diags.HasErrors() || !v.IsKnown() || v.Type().IsSetType() && !v.IsWhollyKnown()
}

func (ev *Eval) ctx(in *Instance) *hcl.EvalContext {
	vars := map[string]cty.Value{
		"var":   ev.vars,
		"local": cty.ObjectVal(ev.locals),
		"path":  cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(ev.m.Dir), "root": cty.StringVal(ev.m.Dir), "cwd": cty.StringVal(ev.m.Dir)}),
	}
	for k, v := range ev.resources {
		vars[k] = v
	}
	if in != nil && in.Key != cty.NilVal {
		if in.Key.Type() == cty.Number {
			vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": in.Key})
		} else {
			vars["each"] = cty.ObjectVal(map[string]cty.Value{"key": in.Key, "value": in.each})
		}
	}
	return &hcl.EvalContext{Variables: vars, Functions: ev.funcs}
}

// functions are the Terraform functions the configuration may use; one it
// uses that is missing here shows as an evaluation error.
func functions() map[string]function.Function {
	to := func(t cty.Type) function.Function { return stdlib.MakeToFunc(t) }
	return map[string]function.Function{
		"can": tryfunc.CanFunc, "try": tryfunc.TryFunc, "anytrue": anyTrue, "alltrue": allTrue, "sum": sum, "one": one,
		"compact": stdlib.CompactFunc, "startswith": startsWith,
		"coalesce": stdlib.CoalesceFunc, "concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc,
		"distinct": stdlib.DistinctFunc, "flatten": stdlib.FlattenFunc, "format": stdlib.FormatFunc,
		"join": stdlib.JoinFunc, "jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc,
		"keys": stdlib.KeysFunc, "length": stdlib.LengthFunc, "lookup": stdlib.LookupFunc,
		"lower": stdlib.LowerFunc, "max": stdlib.MaxFunc, "merge": stdlib.MergeFunc, "min": stdlib.MinFunc,
		"regex": stdlib.RegexFunc, "replace": stdlib.ReplaceFunc, "split": stdlib.SplitFunc,
		"trimprefix": stdlib.TrimPrefixFunc, "trimsuffix": stdlib.TrimSuffixFunc, "upper": stdlib.UpperFunc,
		"values":   stdlib.ValuesFunc,
		"tostring": to(cty.String), "tonumber": to(cty.Number), "tobool": to(cty.Bool),
		"toset": to(cty.Set(cty.DynamicPseudoType)), "tolist": to(cty.List(cty.DynamicPseudoType)),
		"tomap": to(cty.Map(cty.DynamicPseudoType)),
		"file": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "path", Type: cty.String}},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				// Relative paths are relative to the working directory, as
				// in Terraform; path.module is absolute here.
				b, err := os.ReadFile(args[0].AsString())
				if err != nil {
					return cty.NilVal, err
				}
				return cty.StringVal(string(b)), nil
			},
		}),
	}
}

// anyTrue is Terraform's anytrue: whether any element of a list is true.
var anyTrue = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			if _, v := it.Element(); v.True() {
				return cty.True, nil
			}
		}
		return cty.False, nil
	},
})

// allTrue is Terraform's alltrue: whether every element of a list is true.
var allTrue = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			if _, v := it.Element(); !v.True() {
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

// one is Terraform's one: the element of a collection of one, null of none.
var one = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.DynamicPseudoType),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if !v.Type().IsListType() && !v.Type().IsTupleType() && !v.Type().IsSetType() {
			return cty.NilVal, fmt.Errorf("one: want a list, a tuple or a set, not %s", v.Type().FriendlyName())
		}
		switch n := v.LengthInt(); n {
		case 0:
			return cty.NullVal(cty.DynamicPseudoType), nil
		case 1:
			it := v.ElementIterator()
			it.Next()
			_, e := it.Element()
			return e, nil
		default:
			return cty.NilVal, fmt.Errorf("one: %d elements, want at most 1", n)
		}
	},
})

// sum is Terraform's sum of a list of numbers.
var sum = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Number)}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		total := cty.Zero
		for it := args[0].ElementIterator(); it.Next(); {
			_, v := it.Element()
			total = total.Add(v)
		}
		return total, nil
	},
})

// startsWith is Terraform's startswith.
var startsWith = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(strings.HasPrefix(args[0].AsString(), args[1].AsString())), nil
	},
})

// Needs returns the addresses (T.N, data.T.N) of the resources r depends
// on directly: those its expressions refer to, also through locals, and
// those its depends_on names.
func (m *Module) Needs(r *Resource) map[string]bool {
	out := map[string]bool{}
	seenLocal := map[string]bool{}
	var visit func(vars []hcl.Traversal)
	visit = func(vars []hcl.Traversal) {
		for _, tr := range vars {
			root := tr.RootName()
			attr := func(i int) string {
				if len(tr) > i {
					if a, ok := tr[i].(hcl.TraverseAttr); ok {
						return a.Name
					}
				}
				return ""
			}
			switch root {
			case "var", "each", "count", "path", "self", "terraform":
			case "local":
				name := attr(1)
				if a, ok := m.Locals[name]; ok && !seenLocal[name] {
					seenLocal[name] = true
					visit(a.Expr.Variables())
				}
			case "data":
				if t, n := attr(1), attr(2); t != "" && n != "" {
					out["data."+t+"."+n] = true
				}
			default:
				if n := attr(1); n != "" {
					out[root+"."+n] = true
				}
			}
		}
	}
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			visit(a.Expr.Variables())
		}
		for _, blk := range b.Blocks {
			walk(blk.Body)
		}
	}
	walk(r.Body)
	delete(out, r.Addr())
	return out
}

// Reaches reports whether r depends on the resource at addr, directly or
// through the resources it depends on.
func (m *Module) Reaches(r *Resource, addr string) bool {
	seen := map[string]bool{}
	todo := []*Resource{r}
	for len(todo) > 0 {
		cur := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for a := range m.Needs(cur) {
			if a == addr {
				return true
			}
			if !seen[a] {
				seen[a] = true
				if next := m.Resource(a); next != nil {
					todo = append(todo, next)
				}
			}
		}
	}
	return false
}
