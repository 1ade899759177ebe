package compare

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"regexp"
	"strings"
)

// CheckPlot checks a plot written by Plots, base being its path without
// extension: the PNG decodes, and in it and in the SVG each of paths has a
// series in its own colour with one legend entry, and nothing else is drawn
// in a colour of its own. Tests use it on the files a run wrote.
func CheckPlot(base string, paths []Path) error {
	var errs []error
	if err := checkPNG(base+".png", paths); err != nil {
		errs = append(errs, err)
	}
	if err := checkSVG(base+".svg", paths); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkPNG(file string, paths []Path) error {
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
		if n := count[pathColors[p]]; n < 40 {
			errs = append(errs, fmt.Errorf("%s: %d pixels of %s's colour, want its series", file, n, p))
		}
	}
	return errors.Join(errs...)
}

var (
	svgColour = regexp.MustCompile(`(?:fill|stroke):(#[0-9A-F]{6})`)
	svgText   = regexp.MustCompile(`>([^<]*)</text>`)
)

func checkSVG(file string, paths []Path) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("<?xml")) || !bytes.Contains(b, []byte("<svg")) {
		return fmt.Errorf("%s: not an SVG document", file)
	}
	hex := func(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }
	uses := map[string]int{}
	for _, m := range svgColour.FindAllSubmatch(b, -1) {
		uses[string(m[1])]++
	}
	legend := map[string]int{}
	for _, m := range svgText.FindAllSubmatch(b, -1) {
		legend[strings.TrimSpace(string(m[1]))]++
	}
	var errs []error
	known := map[string]bool{hex(faultShade): true, "#000000": true, "#FFFFFF": true, "#808080": true}
	for _, p := range paths {
		c := hex(pathColors[p])
		known[c] = true
		// One element is the legend's sample; the series draws the rest.
		if uses[c] < 2 {
			errs = append(errs, fmt.Errorf("%s: %s's colour %s drawn %d times, want a series and its legend sample", file, p, c, uses[c]))
		}
		if legend[string(p)] != 1 {
			errs = append(errs, fmt.Errorf("%s: legend names %s %d times, want once", file, p, legend[string(p)]))
		}
	}
	for c, n := range uses {
		if !known[c] {
			errs = append(errs, fmt.Errorf("%s: %d elements in %s, a colour of no path", file, n, c))
		}
	}
	return errors.Join(errs...)
}
