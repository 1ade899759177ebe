// Package plotcheck checks the plots `replica compare` writes (compare's
// Plots): that each path has its series, in its colour, named once. Only
// tests use it: compare's own, and the end-to-end test of
// `replica compare --local`.
package plotcheck

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"regexp"
	"strings"

	"github.com/understudy-kv/understudy/compare"
)

// Check checks a plot written by compare's Plots, base being its path
// without extension: the PNG decodes and shows each of paths' colours; the
// SVG has a series for each of paths in its colour (not just a legend
// sample), names each once, and draws nothing else in a colour of its own.
func Check(base string, paths []compare.Path) error {
	var errs []error
	if err := checkPNG(base+".png", paths); err != nil {
		errs = append(errs, err)
	}
	if err := checkSVG(base+".svg", paths); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkPNG(file string, paths []compare.Path) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: not a PNG: %w", file, err)
	}
	b := img.Bounds()
	if b.Dx() < 200 || b.Dy() < 100 {
		return fmt.Errorf("%s: %dx%d pixels, too small for a plot", file, b.Dx(), b.Dy())
	}
	count := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			count[color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: uint8(a >> 8)}]++
		}
	}
	var errs []error
	for _, p := range paths {
		// The legend's sample alone is a few dozen pixels; a series
		// is more.
		if n := count[compare.PathColor(p)]; n < 40 {
			errs = append(errs, fmt.Errorf("%s: %d pixels of %s's colour, want its series", file, n, p))
		}
	}
	return errors.Join(errs...)
}

var (
	svgPath = regexp.MustCompile(`<path d="([^"]*)" style="([^"]*)"`)
	svgFill = regexp.MustCompile(`(?:fill|stroke):(#[0-9A-F]{6})`)
	svgText = regexp.MustCompile(`>([^<]*)</text>`)
)

// checkSVG finds each path's series among the drawn elements by its
// colour: a line of more than two vertices (a legend sample has two), or
// more than one point.
func checkSVG(file string, paths []compare.Path) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("<?xml")) || !bytes.Contains(b, []byte("<svg")) {
		return fmt.Errorf("%s: not an SVG document", file)
	}
	hex := func(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }
	type marks struct{ lines, points, elems int }
	drawn := map[string]*marks{}
	for _, m := range svgPath.FindAllSubmatch(b, -1) {
		d, style := string(m[1]), string(m[2])
		for _, c := range svgFill.FindAllStringSubmatch(style, -1) {
			mk := drawn[c[1]]
			if mk == nil {
				mk = &marks{}
				drawn[c[1]] = mk
			}
			mk.elems++
			switch {
			case strings.Contains(d, "A"):
				mk.points++
			case strings.Count(d, "L") > 2:
				mk.lines++
			}
		}
	}
	legend := map[string]int{}
	for _, m := range svgText.FindAllSubmatch(b, -1) {
		legend[strings.TrimSpace(string(m[1]))]++
	}
	var errs []error
	known := map[string]bool{hex(compare.FaultShade()): true, "#000000": true, "#FFFFFF": true, "#808080": true}
	for _, p := range paths {
		c := hex(compare.PathColor(p))
		known[c] = true
		if mk := drawn[c]; mk == nil || (mk.lines == 0 && mk.points < 2) {
			errs = append(errs, fmt.Errorf("%s: no series in %s's colour %s (%+v)", file, p, c, mk))
		}
		if legend[string(p)] != 1 {
			errs = append(errs, fmt.Errorf("%s: %s is named %d times (legend or panel title), want once", file, p, legend[string(p)]))
		}
	}
	for c, mk := range drawn {
		if !known[c] {
			errs = append(errs, fmt.Errorf("%s: %d elements in %s, a colour of no path", file, mk.elems, c))
		}
	}
	return errors.Join(errs...)
}
