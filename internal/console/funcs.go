package console

import (
	"fmt"
	"html/template"
	"net/url"
)

var funcs = template.FuncMap{
	// bytes shows a size for people.
	"bytes": func(n int64) string {
		const unit = 1024
		if n < unit {
			return fmt.Sprintf("%d B", n)
		}
		div, exp := int64(unit), 0
		for m := n / unit; m >= unit; m /= unit {
			div *= unit
			exp++
		}
		return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
	},
	"pathesc": url.PathEscape,
	"objurl":  objectURL,
	"f1":      func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":      func(v float64) string { return fmt.Sprintf("%.2f", v) },
}
