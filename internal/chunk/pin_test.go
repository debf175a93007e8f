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
	for _, c := range []struct {
		name string
		f    func(*Pin)
	}{{"release", (*Pin).Release}, {"retain", (*Pin).Retain}} {
		released := NewPin(func() {})
		released.Release()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s after the last release did not panic", c.name)
				}
			}()
			c.f(released)
		}()
	}
	var none *Pin
	none.Retain()
	none.Release()
}
