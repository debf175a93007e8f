package chunk

import "testing"

func TestPin(t *testing.T) {
	freed := 0
	p := NewPin(func() { freed++ })
	p.Retain()
	p.Retain()
	p.Release()
	p.Release()
	if freed != 0 {
		t.Fatal("freed with a reference left")
	}
	p.Release()
	if freed != 1 {
		t.Fatalf("freed %d times after the last release", freed)
	}
	for name, f := range map[string]func(){"release": p.Release, "retain": p.Retain} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s after the last release did not panic", name)
				}
			}()
			f()
		}()
	}
	var none *Pin
	none.Retain()
	none.Release()
}
