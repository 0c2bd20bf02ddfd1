package process

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkYAML walks the config document n against the Go type t (the struct the file decodes
// into, with yaml tags) and reports, as mongod does, the first key nobody knows
// ("Unrecognized option: net.bogus") or value of the wrong type, by its dotted name: yaml's
// own errors name Go types and struct fields, which mean nothing to a user.
func checkYAML(n *yaml.Node, t reflect.Type, prefix string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			if err := checkYAML(c, t, prefix); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	name := strings.TrimPrefix(prefix, ".")
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("option %s must be a section of options, not %s", name, describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			ft, ok := yamlField(t, key)
			if !ok {
				return fmt.Errorf("Unrecognized option: %s", strings.TrimPrefix(prefix+"."+key, "."))
			}
			if err := checkYAML(val, ft, prefix+"."+key); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map, reflect.Interface:
		return nil // free-form (setParameter, sections accepted whole)
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("option %s takes a single value, not %s", name, describe(n))
	}
	if n.Tag == "!!null" {
		return nil
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return fmt.Errorf("Bad value for option %s: %q is not %s", name, n.Value, kindName(t))
	}
	return nil
}

// yamlField finds the type of the field of struct t whose yaml name is key, looking into
// inline fields.
func yamlField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if r, ok := yamlField(ft, key); ok {
					return r, true
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f.Type, true
		}
	}
	return nil, false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a section"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a valid value"
}
