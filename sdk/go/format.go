package conflux

/*
#include <stdlib.h>
#include "conflux.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"unsafe"
)

// Format is a registered Conflux format: the description of one C-compatible struct
// (registered formats live until the process ends, like the C registry's).
type Format struct {
	ptr     *C.struct_cx_format
	Token   uint64       // the format token
	Name    string       // the top struct's name
	Size    int          // the struct's size in bytes
	Schema  string       // the JSON schema form (fields in offset order)
	CLayout bool         // Schema describes exactly this layout (C auto-layout)
	goType  reflect.Type // the Go struct it was made from (nil: from JSON)
}

func (f *Format) String() string {
	return fmt.Sprintf("format '%s' token=%016x size=%d", f.Name, f.Token, f.Size)
}

var formatCache sync.Map // key: fmtKey or string (JSON) -> *Format

type fmtKey struct {
	t    reflect.Type
	name string
}

// FormatOf is the format of the Go struct type T, named name, with T's own offsets: any
// struct of fixed-size fields works (Go lays structs out like C on the same machine).
//
//	int8..int64, uint8..uint64, int/uint (64-bit) -> "int8".."uint64"
//	float32, float64                                -> "float", "double"
//	bool                                            -> "bool"
//	[N]T, [N][M]T                                   -> "T[N]", "T[N][M]"
//	a nested struct                                 -> a nested struct "<name>_<field>"
//
// Field names are the Go names, or the tag `conflux:"name"`; `conflux:"name,char"` makes a
// [N]byte a C char[N]; `conflux:"-"` leaves a field out. Strings, slices, pointers, maps,
// interfaces, complex numbers and uintptr are refused, naming the field.
func FormatOf[T any](name string) (*Format, error) {
	return formatOfType(reflect.TypeOf((*T)(nil)).Elem(), name)
}

func formatOfType(t reflect.Type, name string) (*Format, error) {
	key := fmtKey{t, name}
	if f, ok := formatCache.Load(key); ok {
		return f.(*Format), nil
	}
	var d decl
	if err := d.structOf(t, name, ""); err != nil {
		return nil, err
	}
	defer lock()()
	ptr, err := d.create()
	if err != nil {
		return nil, err
	}
	reg, err := register(ptr)
	if err != nil {
		return nil, err
	}
	f := newFormat(reg)
	f.goType, f.Schema = t, d.schema()
	if trial, err := fromJSON(f.Schema); err == nil {
		f.CLayout = uint64(C.cx_format_token(trial)) == f.Token
		C.cx_format_free(trial)
	}
	g, _ := formatCache.LoadOrStore(key, f)
	return g.(*Format), nil
}

// FormatFromJSON is the format of a JSON schema (the Channel resource's form; C layout):
//
//	{"name":"sample","fields":[{"name":"step","type":"int64"},{"name":"pos","type":"float[3]"}]}
func FormatFromJSON(schema string) (*Format, error) {
	if f, ok := formatCache.Load(schema); ok {
		return f.(*Format), nil
	}
	defer lock()()
	ptr, err := fromJSON(schema)
	if err != nil {
		return nil, err
	}
	reg, err := register(ptr)
	if err != nil {
		return nil, err
	}
	f := newFormat(reg)
	f.Schema, f.CLayout = schema, true
	g, _ := formatCache.LoadOrStore(schema, f)
	return g.(*Format), nil
}

func fromJSON(schema string) (*C.struct_cx_format, error) {
	cs := C.CString(schema)
	defer C.free(unsafe.Pointer(cs))
	var out *C.struct_cx_format
	if err := check(C.cx_format_from_json(cs, C.size_t(len(schema)), nil, &out), "format schema"); err != nil {
		return nil, err
	}
	return out, nil
}

func register(f *C.struct_cx_format) (*C.struct_cx_format, error) {
	var canon *C.struct_cx_format
	if err := check(C.cx_format_registry_insert(f, &canon), "format registry"); err != nil {
		return nil, err
	}
	return canon, nil
}

func newFormat(p *C.struct_cx_format) *Format {
	return &Format{ptr: p, Token: uint64(C.cx_format_token(p)), Name: C.GoString(C.cx_format_name(p)),
		Size: int(C.cx_format_size(p))}
}

// fits says whether events of Go type t are laid out as f describes.
func (f *Format) fits(t reflect.Type) error {
	if f.goType == t {
		return nil
	}
	g, err := formatOfType(t, f.Name)
	if err != nil {
		return err
	}
	if g.Token != f.Token {
		return usageError("format", "%s does not describe Go type %v (its layout is token %016x)",
			f, t, g.Token)
	}
	return nil
}

// ---- a Go struct type as struct declarations --------------------------------------------

type declField struct {
	name, typ  string
	esize, off uintptr
}

type declStruct struct {
	name   string
	fields []declField
	size   uintptr
}

type decl struct{ structs []declStruct }

func (d *decl) structOf(t reflect.Type, sname, path string) error {
	if t.Kind() != reflect.Struct {
		return usageError("format", "format '%s' needs a struct type, got %v", sname, t)
	}
	idx := len(d.structs)
	d.structs = append(d.structs, declStruct{name: sname, size: t.Size()})
	var fields []declField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, opt, _ := strings.Cut(sf.Tag.Get("conflux"), ",")
		if name == "-" || sf.Name == "_" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fpath := name
		if path != "" {
			fpath = path + "." + name
		}
		typ, esize, err := d.element(sf.Type, sname, name, fpath, opt == "char")
		if err != nil {
			return err
		}
		fields = append(fields, declField{name, typ, esize, sf.Offset})
	}
	d.structs[idx].fields = fields
	return nil
}

func (d *decl) element(t reflect.Type, sname, fname, path string, char bool) (string, uintptr, error) {
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return fmt.Sprintf("int%d", t.Size()*8), t.Size(), nil
	case reflect.Uint8:
		if char {
			return "char", 1, nil
		}
		return "uint8", 1, nil
	case reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return fmt.Sprintf("uint%d", t.Size()*8), t.Size(), nil
	case reflect.Float32:
		return "float", 4, nil
	case reflect.Float64:
		return "double", 8, nil
	case reflect.Bool:
		return "bool", 1, nil
	case reflect.Array:
		typ, esize, err := d.element(t.Elem(), sname, fname, path, char)
		if err != nil {
			return "", 0, err
		}
		base, dims, _ := strings.Cut(typ, "[")
		if dims != "" {
			dims = "[" + dims
		}
		return fmt.Sprintf("%s[%d]%s", base, t.Len(), dims), esize, nil
	case reflect.Struct:
		sub := sname + "_" + fname
		if err := d.structOf(t, sub, path); err != nil {
			return "", 0, err
		}
		return sub, t.Size(), nil
	}
	return "", 0, usageError("format", "field '%s': Go type %v has no Conflux equivalent (fixed-size "+
		"integers, float32/64, bool, arrays and structs of them do)", path, t)
}

// create calls cx_format_create with C copies of the declaration (cgo: no Go pointers in
// memory handed to C).
func (d *decl) create() (*C.struct_cx_format, error) {
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	calloc := func(n int, size uintptr) unsafe.Pointer {
		p := C.calloc(C.size_t(n), C.size_t(size))
		frees = append(frees, p)
		return p
	}
	decls := unsafe.Slice((*C.struct_cx_struct_decl)(calloc(len(d.structs)+1, C.sizeof_struct_cx_struct_decl)),
		len(d.structs)+1)
	for i, s := range d.structs {
		fl := unsafe.Slice((*C.struct_cx_field)(calloc(len(s.fields)+1, C.sizeof_struct_cx_field)), len(s.fields)+1)
		for j, f := range s.fields {
			fl[j].name, fl[j]._type = cstr(f.name), cstr(f.typ)
			fl[j].size, fl[j].offset = C.size_t(f.esize), C.size_t(f.off)
		}
		decls[i].name, decls[i].fields, decls[i].size = cstr(s.name), &fl[0], C.size_t(s.size)
	}
	var out *C.struct_cx_format
	if err := check(C.cx_format_create(&decls[0], nil, &out), "format '"+d.structs[0].name+"'"); err != nil {
		return nil, err
	}
	return out, nil
}

// schema is the JSON schema of the declaration, fields in offset order.
func (d *decl) schema() string {
	type jf struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	type js struct {
		Name    string `json:"name"`
		Fields  []jf   `json:"fields"`
		Structs []js   `json:"structs,omitempty"`
	}
	list := func(s declStruct) js {
		fs := append([]declField(nil), s.fields...)
		sort.SliceStable(fs, func(a, b int) bool { return fs[a].off < fs[b].off })
		out := js{Name: s.name, Fields: []jf{}}
		for _, f := range fs {
			out.Fields = append(out.Fields, jf{f.name, f.typ})
		}
		return out
	}
	top := list(d.structs[0])
	for _, s := range d.structs[1:] {
		top.Structs = append(top.Structs, list(s))
	}
	b, _ := json.Marshal(top)
	return string(b)
}
