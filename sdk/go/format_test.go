package conflux_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	conflux "conflux.dev/sdk/go"
)

func TestVersionIsTheHeaders(t *testing.T) {
	h, err := os.ReadFile("../../dataplane/src/api/conflux_version.h")
	if err != nil {
		t.Fatal(err)
	}
	v := fmt.Sprintf("%d.%d.%d", conflux.VersionMajor, conflux.VersionMinor, conflux.VersionPatch)
	if conflux.Version() != v || !strings.Contains(string(h), `#define CONFLUX_VERSION_STRING "`+v+`"`) {
		t.Fatalf("version %s, numbers %s, header:\n%s", conflux.Version(), v, h)
	}
}

type vec struct{ X, Y float64 }

type cell struct {
	ID    uint32      `conflux:"id"`
	V     [2]vec      `conflux:"v"`
	Grid  [2][3]int16 `conflux:"grid"`
	Label [5]byte     `conflux:"label,char"`
	OK    bool        `conflux:"ok"`
	Skip  int32       `conflux:"-"`
	Raw   [3]uint8    `conflux:"raw"`
}

func TestFormatOfAStructIsItsSchema(t *testing.T) {
	f, err := conflux.FormatOf[cell]("cell")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Name    string
		Fields  []struct{ Name, Type string }
		Structs []struct {
			Name   string
			Fields []struct{ Name, Type string }
		}
	}
	if err := json.Unmarshal([]byte(f.Schema), &s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fd := range s.Fields {
		got = append(got, fd.Name+":"+fd.Type)
	}
	want := "id:uint32 v:cell_v[2] grid:int16[2][3] label:char[5] ok:bool raw:uint8[3]"
	if strings.Join(got, " ") != want || len(s.Structs) != 1 || s.Structs[0].Name != "cell_v" {
		t.Fatalf("schema %s", f.Schema)
	}
	if f.Size != int(unsafe.Sizeof(cell{})) || f.Name != "cell" {
		t.Fatalf("format %v", f)
	}
	// The Go layout here has a hole where Skip is, which C auto-layout would not leave.
	if f.CLayout {
		t.Fatalf("%v: a field left out cannot be the C layout of the schema", f)
	}
	type plain struct {
		Step   int64
		Energy float64
		Pos    [3]float32
	}
	p, _ := conflux.FormatOf[plain]("plain")
	j, err := conflux.FormatFromJSON(p.Schema)
	if err != nil || !p.CLayout || j.Token != p.Token {
		t.Fatalf("plain: %v (C layout %v) vs JSON %v: %v", p, p.CLayout, j, err)
	}
}

func TestUnmappableGoTypesAreRefusedNamingTheField(t *testing.T) {
	type withString struct{ Name string }
	type withSlice struct{ V []float64 }
	type withPtr struct{ P *int }
	type nested struct{ In struct{ C complex128 } }
	for _, c := range []struct {
		f    func() error
		want string
	}{
		{func() error { _, err := conflux.FormatOf[withString]("x"); return err }, "field 'Name'"},
		{func() error { _, err := conflux.FormatOf[withSlice]("x"); return err }, "field 'V'"},
		{func() error { _, err := conflux.FormatOf[withPtr]("x"); return err }, "field 'P'"},
		{func() error { _, err := conflux.FormatOf[nested]("x"); return err }, "field 'In.C'"},
		{func() error { _, err := conflux.FormatOf[int]("x"); return err }, "needs a struct"},
	} {
		err := c.f()
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("got %v, want an EINVAL naming %q", err, c.want)
		}
	}
}

func TestBadSchemaCarriesTheLibraryMessage(t *testing.T) {
	_, err := conflux.FormatFromJSON(`{"name":"x","fields":[{"name":"a","type":"int33"}]}`)
	var e *conflux.Error
	if !errors.As(err, &e) || e.Errno != syscall.EINVAL || !strings.Contains(e.Msg, "unknown type 'int33'") {
		t.Fatalf("got %v", err)
	}
}
