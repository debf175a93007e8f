package md5lanes

import (
	"runtime"
	"unsafe"
)

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func runtimeKeepAlive(x any) { runtime.KeepAlive(x) }
